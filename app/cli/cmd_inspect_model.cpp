// `cachelens-cli inspect-model`: architecture, config, parameters, tensors and the memory a model
// folder needs, checked without reading its weights (a 16 GB checkpoint in well under a second):
// the config through its architecture, every shard header against the tensors the config implies.
#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "engine/base/errors.h"
#include "engine/base/process_memory.h"
#include "engine/model/model_folder.h"

namespace cl::cli {
namespace {

struct InspectOptions {
    ModelOptions model;
    bool tensors = false;
    bool json = false;
    bool hash = false;
};

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

// "1.23 GB", "4.5 MB": a checkpoint's size and the embedded model's in one format.
std::string size_text(double bytes) {
    char buf[32];
    if (bytes >= 1e9)
        std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
    else
        std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
    return buf;
}

// What the folder needs in memory: the weights as the engine holds them on the CPU (float32,
// whatever the stored dtype) and the K/V of one token across the layers.
struct MemoryNeed {
    int64_t stored_bytes = 0;
    int64_t cpu_bytes = 0;
    int64_t kv_bytes_per_token = 0;
    double available_bytes = 0;
};

MemoryNeed memory_need(const ModelFolder& f) {
    const auto& c = f.config;
    MemoryNeed m;
    m.stored_bytes = f.stored_bytes;
    m.cpu_bytes = c.parameter_count() * 4;
    m.kv_bytes_per_token = 2 * c.n_layers * c.n_kv_heads * c.head_dim() * 4;
    m.available_bytes = available_memory_bytes();
    return m;
}

struct Inspected {
    ModelFolder folder;
    std::unique_ptr<Tokenizer> tokenizer;
    MemoryNeed memory;
    std::string hash;  // "" unless --hash
};

int print_json(const Inspected& in) {
    const auto& f = in.folder;
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& t : f.tensors)
        tensors.push_back(
            {{"name", t.name}, {"shape", t.shape}, {"dtype", t.stored_dtype}, {"file", t.file}});
    const auto eot =
        f.end_of_turn.empty() ? std::nullopt : in.tokenizer->token_to_id(f.end_of_turn);
    nlohmann::json j = {{"folder", f.dir.string()},
                        {"architecture", f.config.architecture},
                        {"config", nlohmann::json::parse(f.config.to_json())},
                        {"parameters", f.config.parameter_count()},
                        {"weights_file_bytes", in.memory.stored_bytes},
                        {"weights_memory_bytes", in.memory.cpu_bytes},
                        {"memory_available_bytes", in.memory.available_bytes},
                        {"kv_bytes_per_token", in.memory.kv_bytes_per_token},
                        {"tokenizer_vocab", in.tokenizer->vocab_size()},
                        {"eot_id", eot ? *eot : -1},
                        {"notes", f.notes},
                        {"tensors", tensors}};
    if (!in.hash.empty()) j["content_hash"] = in.hash;
    std::printf("%s\n", j.dump(2).c_str());
    return kOk;
}

int print_text(const Inspected& in, bool list_tensors) {
    const auto& f = in.folder;
    const auto& c = f.config;
    const auto& m = in.memory;
    std::printf("model           %s\n", f.dir.c_str());
    std::printf(
        "architecture    %s: %lld layers, d_model %lld, %lld heads (%lld kv), head dim %lld, MLP "
        "%lld%s%s\n",
        c.architecture.c_str(), (long long)c.n_layers, (long long)c.d_model, (long long)c.n_heads,
        (long long)c.n_kv_heads, (long long)c.head_dim(), (long long)c.mlp_hidden_size,
        c.qkv_bias ? ", q/k/v biases" : "",
        c.logits_shift ? ", shifted logits (row i predicts token i+1)" : "");
    std::printf("vocabulary      %lld rows (tokenizer: %d ids)\n", (long long)c.vocab_size,
                in.tokenizer->vocab_size());
    std::printf("special ids     mask %lld, eos %lld, pad %lld, bos %lld\n",
                (long long)c.mask_token_id, (long long)c.eos_token_id, (long long)c.pad_token_id,
                (long long)c.bos_token_id);
    std::printf("rope            theta %g, max sequence %lld; rms_norm_eps %g\n", c.rope_theta,
                (long long)c.max_sequence_length, c.rms_norm_eps);
    std::printf("parameters      %lld (%.3f B)\n", (long long)c.parameter_count(),
                c.parameter_count() / 1e9);
    std::printf(
        "memory          %s on disk; cpu: %s (float32) + %.1f KB K/V per token; %s "
        "available here\n",
        size_text(static_cast<double>(m.stored_bytes)).c_str(),
        size_text(static_cast<double>(m.cpu_bytes)).c_str(), m.kv_bytes_per_token / 1024.0,
        size_text(m.available_bytes).c_str());
    if (m.available_bytes > 0 && m.cpu_bytes > 0.9 * m.available_bytes)
        std::printf("                does not fit here: loading it on the cpu is refused\n");
    if (!in.hash.empty()) std::printf("content hash    %s\n", in.hash.c_str());
    std::printf("tensors         %zu in %zu file(s), checked against config.json\n",
                f.tensors.size(), f.weight_files.size());
    for (const auto& note : f.notes) std::printf("note            %s\n", note.c_str());
    if (list_tensors)
        for (const auto& t : f.tensors)
            std::printf("  %-52s %-16s %-5s %s\n", t.name.c_str(), shape_text(t.shape).c_str(),
                        t.stored_dtype.c_str(), t.file.c_str());
    return kOk;
}

int run_inspect(const InspectOptions& o) {
    Inspected in;
    in.folder = check_model_folder(o.model.folder());
    const auto tok_file = in.folder.dir / "tokenizer.json";
    if (!std::filesystem::exists(tok_file)) throw InputError(tok_file, "tokenizer.json not found");
    in.tokenizer = Tokenizer::load(tok_file);
    in.memory = memory_need(in.folder);
    if (o.hash) in.hash = content_hash(in.folder);
    return o.json ? print_json(in) : print_text(in, o.tensors);
}

}  // namespace

void add_inspect_model_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<InspectOptions>();
    auto* cmd = root.add_subcommand(
        "inspect-model",
        "Describe a model folder without loading its weights: architecture, parameters, tensors "
        "(checked against config.json), memory needed");
    o->model.add_to(*cmd);
    cmd->add_flag("--tensors", o->tensors, "List every tensor with shape, dtype and shard");
    cmd->add_flag("--json", o->json, "Print JSON instead of text");
    cmd->add_flag("--hash", o->hash, "Also hash every weight byte (reads the whole folder)");
    cmd->callback([o, &run] { run = [o] { return run_inspect(*o); }; });
}

}  // namespace cl::cli

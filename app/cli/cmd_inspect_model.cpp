// `cachelens-cli inspect-model`: config, parameter count, tensors and memory of a model folder.
#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"

namespace cl::cli {
namespace {

struct InspectOptions {
    ModelOptions model;
    bool tensors = false;
    bool json = false;
};

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

int run_inspect(const InspectOptions& o) {
    auto model = o.model.load();
    const auto& c = model->config();
    const auto& tok = model->tokenizer();
    int64_t file_bytes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(model->directory()))
        if (entry.path().extension() == ".safetensors")
            file_bytes += static_cast<int64_t>(entry.file_size());
    if (o.json) {
        nlohmann::json tensors = nlohmann::json::array();
        for (const auto& t : model->tensors())
            tensors.push_back({{"name", t.name},
                               {"shape", t.shape},
                               {"dtype", t.stored_dtype},
                               {"file", t.file}});
        nlohmann::json j = {
            {"folder", model->directory().string()},
            {"config", nlohmann::json::parse(c.to_json())},
            {"parameters", model->parameter_count()},
            {"weights_file_bytes", file_bytes},
            {"weights_memory_bytes", model->weight_bytes_in_memory()},
            {"kv_bytes_per_token", 2 * c.n_layers * c.n_kv_heads * c.head_dim() * 4},
            {"content_hash", model->content_hash()},
            {"tokenizer_vocab", tok.vocab_size()},
            {"eot_id", model->eot_id()},
            {"tensors", tensors}};
        std::printf("%s\n", j.dump(2).c_str());
        return kOk;
    }
    std::printf("model           %s (%s)\n", model->name().c_str(), model->directory().c_str());
    std::printf(
        "architecture    LLaDA: %lld layers, d_model %lld, %lld heads (%lld kv), head dim %lld, "
        "MLP %lld\n",
        (long long)c.n_layers, (long long)c.d_model, (long long)c.n_heads, (long long)c.n_kv_heads,
        (long long)c.head_dim(), (long long)c.mlp_hidden_size);
    std::printf("vocabulary      %lld rows (tokenizer: %d ids)\n", (long long)c.vocab_size,
                tok.vocab_size());
    std::printf("special ids     mask %lld, eos %lld, bos %lld, eot %d\n",
                (long long)c.mask_token_id, (long long)c.eos_token_id, (long long)c.bos_token_id,
                model->eot_id());
    std::printf("rope            theta %g, max sequence %lld; rms_norm_eps %g\n", c.rope_theta,
                (long long)c.max_sequence_length, c.rms_norm_eps);
    std::printf("parameters      %lld (%.2f M)\n", (long long)model->parameter_count(),
                model->parameter_count() / 1e6);
    std::printf("memory          %.2f MB on disk, %.2f MB loaded (float32), KV %.1f KB per token\n",
                file_bytes / 1e6, model->weight_bytes_in_memory() / 1e6,
                2.0 * c.n_layers * c.n_kv_heads * c.head_dim() * 4 / 1024.0);
    std::printf("content hash    %s\n", model->content_hash().c_str());
    std::printf("tensors         %zu\n", model->tensors().size());
    if (o.tensors)
        for (const auto& t : model->tensors())
            std::printf("  %-52s %-16s %-5s %s\n", t.name.c_str(), shape_text(t.shape).c_str(),
                        t.stored_dtype.c_str(), t.file.c_str());
    return kOk;
}

}  // namespace

void add_inspect_model_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<InspectOptions>();
    auto* cmd = root.add_subcommand("inspect-model",
                                    "Describe a model folder: config, parameters, tensors, memory");
    o->model.add_to(*cmd);
    cmd->add_flag("--tensors", o->tensors, "List every tensor with shape, dtype and shard");
    cmd->add_flag("--json", o->json, "Print JSON instead of text");
    cmd->callback([o, &run] { run = [o] { return run_inspect(*o); }; });
}

}  // namespace cl::cli

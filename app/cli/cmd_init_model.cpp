// `cachelens-cli init-model --out DIR`: a randomly initialised model (LLaDA or Dream) with a
// byte-level tokenizer, as an HF folder. For tests and experiments with shapes.
#include <fstream>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "engine/base/errors.h"
#include "engine/model/model_writer.h"

namespace cl::cli {
namespace {

struct InitOptions {
    std::string out;
    int64_t d_model = 64, n_layers = 2, n_heads = 4, n_kv_heads = 0, mlp_hidden = 0, max_seq = 4096;
    double rope_theta = 10000.0;
    uint64_t seed = 0;
    std::string dtype = "f32";
    std::string arch = "llada";
    int shards = 1;
    bool force = false;
};

int run_init(const InitOptions& o) {
    if (std::filesystem::exists(o.out) && !std::filesystem::is_empty(o.out) && !o.force)
        throw InputError(o.out, "folder exists and is not empty (use --force to overwrite)");
    ModelConfig c =
        tiny_config(o.d_model, o.n_layers, o.n_heads, o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads);
    c.mlp_hidden_size = o.mlp_hidden > 0 ? o.mlp_hidden : 4 * o.d_model;
    c.max_sequence_length = o.max_seq;
    c.rope_theta = o.rope_theta;
    set_architecture(c, o.arch);
    if (o.shards < 1 || o.shards > 1000) throw InputError("--shards: must be between 1 and 1000");
    c = init_random_model(o.out, c, o.seed, parse_storage_dtype(o.dtype), o.shards);
    std::printf("wrote %s: %s, %lld layers, d_model %lld, %lld heads, %lld parameters\n",
                o.out.c_str(), c.architecture.c_str(), (long long)c.n_layers, (long long)c.d_model,
                (long long)c.n_heads, (long long)c.parameter_count());
    return kOk;
}

}  // namespace

void add_init_model_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<InitOptions>();
    auto* cmd = root.add_subcommand(
        "init-model",
        "Write a randomly initialised model (--arch llada|dream) + byte-level tokenizer");
    cmd->add_option("--out", o->out, "Output folder")->required();
    cmd->add_option("--d-model", o->d_model, "Hidden size")
        ->capture_default_str()
        ->check(CLI::Range(2, 16384));
    cmd->add_option("--layers", o->n_layers, "Transformer blocks")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    cmd->add_option("--heads", o->n_heads, "Attention heads")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    cmd->add_option("--kv-heads", o->n_kv_heads,
                    "K/V heads (GQA when fewer than --heads; default: --heads)");
    cmd->add_option("--mlp-hidden", o->mlp_hidden, "MLP hidden size (default: 4 x d_model)");
    cmd->add_option("--max-seq-len", o->max_seq, "Maximum sequence length")
        ->capture_default_str()
        ->check(CLI::Range(8, 1 << 20));
    cmd->add_option("--rope-theta", o->rope_theta, "RoPE base")->capture_default_str();
    cmd->add_option("--arch", o->arch,
                    "Architecture: llada, or dream (Qwen2 names, q/k/v biases, shifted logits)")
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Initialisation seed")->capture_default_str();
    cmd->add_option("--dtype", o->dtype, "Storage dtype: f32, f16 or bf16")->capture_default_str();
    cmd->add_option("--shards", o->shards, "Write N shards + model.safetensors.index.json")
        ->capture_default_str();
    cmd->add_flag("--force", o->force, "Overwrite a non-empty folder");
    cmd->callback([o, &run] { run = [o] { return run_init(*o); }; });
}

}  // namespace cl::cli

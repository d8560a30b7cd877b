// `cachelens-cli init-model --out DIR`: a randomly initialised model (LLaDA or Dream) with a
// byte-level tokenizer, as an HF folder; or, with --preset, a published checkpoint's folder at
// full size (weights as holes) or shrunk. For tests and experiments with shapes.
#include <fstream>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "engine/base/errors.h"
#include "engine/model/checkpoint_presets.h"
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
    int shards = 0;  // 0: one file, or four for a preset (as the checkpoints are sharded)
    bool force = false;
    std::string preset;
    bool shrink = false;
    bool random = false;
};

int run_preset(const InitOptions& o) {
    const auto& preset = find_checkpoint_preset(o.preset);
    const ModelConfig c = write_preset_folder(
        o.out, preset, {o.shrink, o.seed, o.shards > 0 ? o.shards : 4, o.random});
    std::printf("wrote %s: %s (%s), %s, %lld layers, d_model %lld, %lld parameters%s\n",
                o.out.c_str(), preset.name.c_str(), preset.repository.c_str(),
                c.architecture.c_str(), (long long)c.n_layers, (long long)c.d_model,
                (long long)c.parameter_count(),
                o.shrink || o.random ? ", random bf16 weights"
                                     : ", bf16 weights left as holes (sparse files)");
    return kOk;
}

int run_init(const InitOptions& o) {
    if (std::filesystem::exists(o.out) && !std::filesystem::is_empty(o.out) && !o.force)
        throw InputError(o.out, "folder exists and is not empty (use --force to overwrite)");
    if (o.shards < 0 || o.shards > 1000) throw InputError("--shards: must be between 1 and 1000");
    if (!o.preset.empty()) return run_preset(o);
    if (o.shrink) throw InputError(Setting{"shrink"}, "needs --preset");
    if (o.random) throw InputError(Setting{"random"}, "needs --preset");
    ModelConfig c =
        tiny_config(o.d_model, o.n_layers, o.n_heads, o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads);
    c.mlp_hidden_size = o.mlp_hidden > 0 ? o.mlp_hidden : 4 * o.d_model;
    c.max_sequence_length = o.max_seq;
    c.rope_theta = o.rope_theta;
    set_architecture(c, o.arch);
    c = init_random_model(o.out, c, o.seed, parse_storage_dtype(o.dtype), std::max(1, o.shards));
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
    cmd->add_option("--shards", o->shards,
                    "Write N shards + model.safetensors.index.json (default 1; 4 with --preset)");
    cmd->add_flag("--force", o->force, "Overwrite a non-empty folder");
    auto* preset =
        cmd->add_option("--preset", o->preset,
                        "A published checkpoint's folder (" + checkpoint_preset_names() +
                            "): its config.json, tensor names, bf16 shards and special token "
                            "ids; full size with the weights left as holes (sparse files), "
                            "or --shrink");
    auto* random = cmd->add_flag(
        "--random", o->random,
        "With --preset, full size: random bf16 weights instead of holes, so that generate and "
        "bench run on the real shapes (LLaDA-8B: 16 GB of disk); written tensor by tensor");
    cmd->add_flag("--shrink", o->shrink,
                  "With --preset: the same keys, tensor names and special ids at 2 layers of "
                  "width 64 with random weights, so that generate runs");
    for (const char* shape : {"--d-model", "--layers", "--heads", "--kv-heads", "--mlp-hidden",
                              "--max-seq-len", "--rope-theta", "--arch", "--dtype"})
        preset->excludes(cmd->get_option(shape));
    random->excludes(cmd->get_option("--shrink"));
    cmd->callback([o, &run] { run = [o] { return run_init(*o); }; });
}

}  // namespace cl::cli

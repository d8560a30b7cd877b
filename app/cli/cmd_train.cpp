// `cachelens-cli train`: trains a LLaDA- or Dream-architecture model on the task suite (masked or
// uniform diffusion), from scratch or from another model folder (converted when its architecture
// differs).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/progress.h"
#include "engine/base/errors.h"
#include "engine/model/model.h"
#include "engine/training/trainer.h"

namespace cl::cli {
namespace {

struct TrainCliOptions {
    TrainOptions train;
    int64_t d_model = 128, n_layers = 6, n_heads = 4, n_kv_heads = 0, mlp_hidden = 352;
    int threads = 1;
    std::vector<std::string> mixture;
    std::string noise = "masked";
};

int run_train(TrainCliOptions o) {
    set_thread_count(o.threads);
    o.train.shape.d_model = o.d_model;
    o.train.shape.n_layers = o.n_layers;
    o.train.shape.n_heads = o.n_heads;
    o.train.shape.n_kv_heads = o.n_kv_heads;
    o.train.shape.mlp_hidden_size = o.mlp_hidden;
    o.train.shape.max_sequence_length = 1024;
    o.train.shape.rope_theta = 10000.0;
    const auto noise = parse_noise_process(o.noise);
    if (!noise) throw InputError("--noise: '" + o.noise + "' is not masked or uniform");
    o.train.noise = *noise;
    if (!o.mixture.empty()) {
        o.train.mixture.clear();
        for (const auto& m : o.mixture) {
            const auto eq = m.find('=');
            if (eq == std::string::npos)
                throw InputError("--mixture: expected FAMILY=WEIGHT, got '" + m + "'");
            const auto fam = m.substr(0, eq);
            if (std::find(tasks::all_families().begin(), tasks::all_families().end(), fam) ==
                tasks::all_families().end())
                throw InputError("--mixture: unknown task family '" + fam + "'");
            o.train.mixture[fam] = std::stod(m.substr(eq + 1));
        }
    }
    // The bar counts from the first step this process trains (a resumed run's ETA is its own).
    auto bar = std::make_shared<ProgressBar>("steps", static_cast<size_t>(o.train.total_steps));
    auto first_step = std::make_shared<int64_t>(-1);
    o.train.on_progress = [bar, first_step](const TrainProgress& p) {
        if (*first_step < 0) *first_step = p.step;
        char note[128];
        std::snprintf(note, sizeof note, "loss %.4f val %.4f lr %.2e %.0f tok/s", p.loss,
                      p.val_loss, p.lr, p.tokens_per_s);
        bar->update(static_cast<size_t>(p.step), note, static_cast<size_t>(*first_step));
        spdlog::debug("step {} loss {:.4f} val {:.4f}", p.step, p.loss, p.val_loss);
    };
    spdlog::info("training into {} ({})", o.train.out_dir.string(),
                 o.train.resume ? "resuming" : "fresh");
    auto r = train_model(o.train);
    bar->finish();
    spdlog::info("stopped at step {} after {:.0f} s: loss {:.4f}, val {:.4f}, {} tokens seen{}",
                 r.steps_done, r.seconds, r.final_loss, r.final_val_loss, r.tokens_seen,
                 r.finished ? "" : " (resume with --resume)");
    return kOk;
}

}  // namespace

void add_train_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<TrainCliOptions>();
    auto* cmd = root.add_subcommand(
        "train",
        "Train a LLaDA- or Dream-architecture model on the task suite (masked or uniform "
        "diffusion)");
    auto& t = o->train;
    cmd->add_option("--out", t.out_dir, "Model folder to write (checkpoints go to OUT/checkpoint)")
        ->required();
    cmd->add_flag("--resume", t.resume, "Continue from OUT/checkpoint");
    cmd->add_option("--init-from", t.init_from,
                    "Start from a model folder's weights and tokenizer with a fresh optimizer "
                    "(e.g. assets/models/cachelens-tiny)");
    cmd->add_option("--noise", o->noise,
                    "Noise process of a new model: masked (LLaDA) or uniform (GIDD, uniform prior)")
        ->check(CLI::IsMember({"masked", "uniform"}))
        ->capture_default_str();
    cmd->add_option("--d-model", o->d_model, "Hidden size")->capture_default_str();
    cmd->add_option("--layers", o->n_layers, "Transformer blocks")->capture_default_str();
    cmd->add_option("--heads", o->n_heads, "Attention heads")->capture_default_str();
    cmd->add_option("--kv-heads", o->n_kv_heads,
                    "Key/value heads (grouped-query attention); 0: as many as --heads, or as the "
                    "--init-from model's")
        ->capture_default_str();
    cmd->add_option("--arch", t.architecture,
                    "Architecture: llada or dream (default: the --init-from model's, else llada); "
                    "another than --init-from's converts that model first (OUT/converted-start)");
    cmd->add_option("--mlp-hidden", o->mlp_hidden, "MLP hidden size")->capture_default_str();
    cmd->add_option("--vocab-size", t.vocab_size,
                    "BPE vocabulary size (tokenizer trained on the task data)")
        ->capture_default_str();
    cmd->add_option("--steps", t.total_steps, "Optimizer steps in total")->capture_default_str();
    cmd->add_option("--batch-size", t.batch_size, "Sequences per step")->capture_default_str();
    cmd->add_option("--lr", t.lr, "Peak learning rate")->capture_default_str();
    cmd->add_option("--min-lr", t.min_lr, "Final learning rate of the cosine decay")
        ->capture_default_str();
    cmd->add_option("--warmup", t.warmup_steps, "Linear warm-up steps")->capture_default_str();
    cmd->add_option("--weight-decay", t.weight_decay, "AdamW weight decay")->capture_default_str();
    cmd->add_option("--clip", t.clip, "Gradient norm clip")->capture_default_str();
    cmd->add_option("--checkpoint-every", t.checkpoint_every, "Steps between checkpoints")
        ->capture_default_str();
    cmd->add_option("--eval-every", t.eval_every, "Steps between validation losses")
        ->capture_default_str();
    cmd->add_option("--log-every", t.log_every, "Steps between progress lines")
        ->capture_default_str();
    cmd->add_option("--seed", t.seed, "Seed of the data order, noise and initialisation")
        ->capture_default_str();
    cmd->add_option("--mixture", o->mixture,
                    "FAMILY=WEIGHT (repeatable): arith, kv, reverse, prose");
    cmd->add_option("--arith-digits", t.difficulty.arith_max_digits, "Largest operand length")
        ->capture_default_str();
    cmd->add_option("--kv-min-pairs", t.difficulty.kv_min_pairs,
                    "Fewest key-value pairs in a prompt")
        ->capture_default_str();
    cmd->add_option("--kv-max-pairs", t.difficulty.kv_max_pairs, "Most key-value pairs in a prompt")
        ->capture_default_str();
    cmd->add_option("--response-pad", t.response_pad, "Pad responses with EOS to at least N tokens")
        ->capture_default_str();
    cmd->add_option("--response-pad-max", t.response_pad_max,
                    "Draw each batch's pad from [--response-pad, N] (0 = always --response-pad)");
    cmd->add_option("--max-minutes", t.max_minutes,
                    "Checkpoint and stop after this many minutes (0 = no limit)");
    cmd->add_option("--threads", o->threads, "CPU threads")->capture_default_str();
    cmd->callback([o, &run] { run = [o] { return run_train(*o); }; });
}

}  // namespace cl::cli

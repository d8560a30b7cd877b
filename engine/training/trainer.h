// Trainer: a diffusion objective on the CacheLens task suite, for either noise process.
//
// Masked (LLaDA): t ~ U(eps, 1) per sequence, each response token masked with probability t,
// cross-entropy on the masked tokens weighted 1/t and normalised by the response length.
// Uniform (GIDD, uniform prior): each response token replaced by a random token with probability
// t, cross-entropy on every response token. Prompts are never noised.
// AdamW, linear warm-up + cosine decay, gradient clipping, checkpoints with resume, deterministic
// data order for a seed (batch i is a pure function of (seed, i)). Torch-free header.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "engine/model/model_config.h"
#include "engine/tasks/task_suite.h"

namespace cl {

struct TrainProgress {
    int64_t step = 0;
    int64_t total_steps = 0;
    double loss = 0;          // mean over the last log window
    double val_loss = -1;     // last validation loss (-1 = not measured yet)
    double tokens_per_s = 0;  // trained tokens (prompt + response) per second, this session
    double eta_s = 0;
    double lr = 0;
    int64_t tokens_seen = 0;
};

struct TrainOptions {
    std::filesystem::path out_dir;  // the model folder written (and resumed from)
    bool resume = false;            // continue from out_dir/checkpoint
    std::filesystem::path
        init_from;  // start from this model folder (weights + tokenizer), fresh optimizer
    // d_model, n_layers, n_heads, n_kv_heads (0: as many as query heads, or a warm start's),
    // mlp_hidden_size
    ModelConfig shape;
    // The architecture trained: "" keeps a warm start's (LLaDA for a new model); another one, or
    // fewer key/value heads, converts the warm start first (engine/model/arch_conversion.h).
    std::string architecture;
    NoiseProcess noise = NoiseProcess::Masked;  // of a new model (a resumed one keeps its own)
    int vocab_size = 1024;                      // BPE vocabulary incl. 6 special tokens
    int64_t total_steps = 20000;
    int batch_size = 16;
    double lr = 1e-3, min_lr = 1e-4, weight_decay = 0.1, clip = 1.0, eps = 1e-3;
    int64_t warmup_steps = 500;
    int64_t checkpoint_every = 250;
    int64_t eval_every = 250;
    int64_t log_every = 25;
    uint64_t seed = 0;
    std::map<std::string, double> mixture{
        {"arith", 0.35}, {"kv", 0.35}, {"reverse", 0.15}, {"prose", 0.15}};
    tasks::Difficulty difficulty;
    int response_pad = 64;  // responses are padded with EOS to at least this length
    // > response_pad: each batch's pad is drawn from [response_pad, response_pad_max], so the model
    // sees every response length it will generate (a uniform-noise model has no [MASK] to tell it
    // where the answer ends, and fails on lengths it never saw).
    int response_pad_max = 0;
    double max_minutes = 0;  // > 0: checkpoint and stop after this long
    std::function<void(const TrainProgress&)> on_progress;
};

struct TrainResult {
    int64_t steps_done = 0;
    double final_loss = 0;
    double final_val_loss = -1;
    double seconds = 0;
    int64_t tokens_seen = 0;
    bool finished = false;  // reached total_steps
};

// Throws InputError on bad options or an unreadable checkpoint.
TrainResult train_model(const TrainOptions& options);

}  // namespace cl

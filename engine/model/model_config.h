// ModelConfig: the hyper-parameters of a model, in one form for every architecture. Each
// architecture (engine/model/arch_*.cpp) reads it from its own config.json field names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/model/noise_process.h"

namespace cl {

struct ModelConfig {
    int64_t d_model = 0;
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;
    int64_t n_layers = 0;
    int64_t mlp_hidden_size = 0;
    int64_t vocab_size = 0;  // rows of the embedding / head (LLaDA: embedding_size)
    int64_t max_sequence_length = 4096;
    double rope_theta = 500000.0;
    double rms_norm_eps = 1e-5;
    int64_t mask_token_id = -1;
    int64_t eos_token_id = -1;
    int64_t pad_token_id = -1;
    int64_t bos_token_id = -1;
    bool weight_tying = false;
    bool qkv_bias = false;  // q/k/v projections carry biases (Qwen2-style)
    std::string model_type = "llada";
    std::string architecture = "llada";  // the entry of the architecture table that reads it
    int logits_shift = 0;                // row i of the output predicts token i + logits_shift
    NoiseProcess noise_process = NoiseProcess::Masked;  // config.json "noise_process"

    int64_t head_dim() const { return d_model / n_heads; }
    // Parameters of the weights the config implies.
    int64_t parameter_count() const;
    // Throws InputError naming `source` when a field is missing, non-positive or inconsistent.
    void validate(const std::filesystem::path& source) const;
    // config.json text in the architecture's own field names.
    std::string to_json() const;
};

// Reads `dir/config.json` (or the file itself) through the architecture its model_type names.
// Throws InputError naming the file on any problem (unknown architecture, missing field, ...).
ModelConfig load_model_config(const std::filesystem::path& path);

// Sampler defaults shipped with a model (generation_config.json plus CacheLens fields).
struct GenerationDefaults {
    int64_t gen_length = 128;
    int64_t block_length = 32;
    int64_t steps = 128;
    bool chat_template = true;
};
GenerationDefaults load_generation_defaults(const std::filesystem::path& dir);

}  // namespace cl

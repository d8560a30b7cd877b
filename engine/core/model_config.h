// ModelConfig: the LLaDA architecture hyper-parameters, read from a Hugging Face config.json
// with LLaDA's field names (d_model, n_heads, n_kv_heads, n_layers, mlp_hidden_size, ...).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

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
    std::string model_type = "llada";

    int64_t head_dim() const { return d_model / n_heads; }
    // Parameters of the weights the config implies.
    int64_t parameter_count() const;
    // Throws InputError naming `source` when a field is missing, non-positive or inconsistent.
    void validate(const std::filesystem::path& source) const;
    std::string to_json() const;
};

// Reads `dir/config.json` (or the file itself). Throws InputError on any problem.
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

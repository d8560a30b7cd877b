#include "engine/model/model_config.h"

#include <nlohmann/json.hpp>

#include "engine/base/errors.h"
#include "engine/model/architecture.h"
#include "engine/model/config_json.h"

namespace cl {

using detail::get_or;
using detail::read_json_file;

int64_t ModelConfig::parameter_count() const {
    const int64_t kv_dim = n_kv_heads * head_dim();
    const int64_t per_layer = 2 * d_model                      // attn_norm, ff_norm
                              + d_model * d_model              // q_proj
                              + 2 * kv_dim * d_model           // k_proj, v_proj
                              + d_model * d_model              // attn_out
                              + 3 * mlp_hidden_size * d_model  // ff_proj, up_proj, ff_out
                              + (qkv_bias ? d_model + 2 * kv_dim : 0);
    const int64_t head = weight_tying ? 0 : vocab_size * d_model;
    return vocab_size * d_model + n_layers * per_layer + d_model + head;
}

void ModelConfig::validate(const std::filesystem::path& source) const {
    auto require_positive = [&](int64_t v, const char* name) {
        if (v <= 0) throw InputError(source, std::string("field '") + name + "' must be positive");
    };
    require_positive(d_model, "d_model");
    require_positive(n_heads, "n_heads");
    require_positive(n_kv_heads, "n_kv_heads");
    require_positive(n_layers, "n_layers");
    require_positive(mlp_hidden_size, "mlp_hidden_size");
    require_positive(vocab_size, "vocab_size");
    require_positive(max_sequence_length, "max_sequence_length");
    if (d_model % n_heads != 0) throw InputError(source, "d_model is not divisible by n_heads");
    if (n_heads % n_kv_heads != 0)
        throw InputError(source, "n_heads is not divisible by n_kv_heads");
    if (head_dim() % 2 != 0) throw InputError(source, "head dimension must be even for RoPE");
    if (!(rope_theta > 0)) throw InputError(source, "rope_theta must be positive");
    if (!(rms_norm_eps > 0)) throw InputError(source, "rms_norm_eps must be positive");
    if (mask_token_id < 0 || mask_token_id >= vocab_size)
        throw InputError(source, "mask_token_id is missing or outside the vocabulary");
    if (eos_token_id >= vocab_size)
        throw InputError(source, "eos_token_id is outside the vocabulary");
    // Guard against absurd sizes before anything is allocated.
    if (d_model > 65536 || n_layers > 1024 || vocab_size > 10'000'000 || mlp_hidden_size > 1 << 20)
        throw InputError(source, "model dimensions are implausibly large");
}

std::string ModelConfig::to_json() const {
    const auto* arch = detail::find_architecture(architecture);
    if (!arch) throw std::logic_error("ModelConfig: unknown architecture '" + architecture + "'");
    auto j = arch->write_config(*this);
    j["noise_process"] = to_string(noise_process);  // CacheLens's key, the same in every family
    return j.dump(2);
}

ModelConfig load_model_config(const std::filesystem::path& path) {
    const auto file = std::filesystem::is_directory(path) ? path / "config.json" : path;
    if (!std::filesystem::exists(file)) throw InputError(file, "config.json not found");
    const nlohmann::json j = read_json_file(file);
    if (!j.is_object()) throw InputError(file, "expected a JSON object");
    const auto& arch = detail::find_architecture(j, file);
    ModelConfig c = arch.read_config(j, file);
    c.architecture = arch.name;
    c.logits_shift = arch.logits_shift;
    const auto noise = get_or<std::string>(j, "noise_process", "masked", file);
    const auto parsed = parse_noise_process(noise);
    if (!parsed) throw InputError(file, "noise_process '" + noise + "' is not masked or uniform");
    c.noise_process = *parsed;
    c.validate(file);
    return c;
}

GenerationDefaults load_generation_defaults(const std::filesystem::path& dir) {
    GenerationDefaults d;
    const auto file = dir / "generation_config.json";
    if (!std::filesystem::exists(file)) return d;
    const nlohmann::json j = read_json_file(file);
    d.gen_length = get_or<int64_t>(j, "gen_length", d.gen_length, file);
    d.block_length = get_or<int64_t>(j, "block_length", d.block_length, file);
    d.steps = get_or<int64_t>(j, "steps", d.steps, file);
    d.chat_template = get_or<bool>(j, "chat_template", d.chat_template, file);
    return d;
}

}  // namespace cl

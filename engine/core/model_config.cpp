#include "engine/core/model_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/errors.h"

namespace cl {
namespace {

nlohmann::json read_json_file(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw InputError(file, "cannot open file");
    std::stringstream buffer;
    buffer << in.rdbuf();
    try {
        return nlohmann::json::parse(buffer.str());
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(file, std::string("invalid JSON: ") + e.what());
    }
}

template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback, const std::filesystem::path& file) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    try {
        return it->get<T>();
    } catch (const nlohmann::json::exception&) {
        throw InputError(file, std::string("field '") + key + "' has the wrong type");
    }
}

}  // namespace

int64_t ModelConfig::parameter_count() const {
    const int64_t kv_dim = n_kv_heads * head_dim();
    const int64_t per_layer = 2 * d_model                       // attn_norm, ff_norm
                              + d_model * d_model               // q_proj
                              + 2 * kv_dim * d_model            // k_proj, v_proj
                              + d_model * d_model               // attn_out
                              + 3 * mlp_hidden_size * d_model;  // ff_proj, up_proj, ff_out
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
    nlohmann::json j = {
        {"architectures", {"LLaDAModelLM"}},
        {"model_type", model_type},
        {"d_model", d_model},
        {"n_heads", n_heads},
        {"n_kv_heads", n_kv_heads},
        {"n_layers", n_layers},
        {"mlp_hidden_size", mlp_hidden_size},
        {"mlp_ratio", d_model ? mlp_hidden_size / d_model : 0},
        {"vocab_size", vocab_size},
        {"embedding_size", vocab_size},
        {"max_sequence_length", max_sequence_length},
        {"rope_theta", rope_theta},
        {"rms_norm_eps", rms_norm_eps},
        {"mask_token_id", mask_token_id},
        {"eos_token_id", eos_token_id},
        {"pad_token_id", pad_token_id},
        {"bos_token_id", bos_token_id},
        {"weight_tying", weight_tying},
        {"activation_type", "silu"},
        {"block_type", "llama"},
        {"layer_norm_type", "rms"},
        {"rope", true},
        {"alibi", false},
        {"include_bias", false},
        {"include_qkv_bias", false},
    };
    return j.dump(2);
}

ModelConfig load_model_config(const std::filesystem::path& path) {
    const auto file = std::filesystem::is_directory(path) ? path / "config.json" : path;
    if (!std::filesystem::exists(file)) throw InputError(file, "config.json not found");
    const nlohmann::json j = read_json_file(file);
    if (!j.is_object()) throw InputError(file, "expected a JSON object");
    ModelConfig c;
    c.model_type = get_or<std::string>(j, "model_type", "llada", file);
    c.d_model = get_or<int64_t>(j, "d_model", 0, file);
    c.n_heads = get_or<int64_t>(j, "n_heads", 0, file);
    c.n_kv_heads = get_or<int64_t>(j, "n_kv_heads", c.n_heads, file);
    c.n_layers = get_or<int64_t>(j, "n_layers", 0, file);
    c.mlp_hidden_size = get_or<int64_t>(j, "mlp_hidden_size", 0, file);
    // LLaDA stores the padded vocabulary as embedding_size; vocab_size may be smaller.
    const int64_t vocab = get_or<int64_t>(j, "vocab_size", 0, file);
    c.vocab_size = get_or<int64_t>(j, "embedding_size", vocab, file);
    if (c.vocab_size == 0) c.vocab_size = vocab;
    c.max_sequence_length = get_or<int64_t>(j, "max_sequence_length", 4096, file);
    c.rope_theta = get_or<double>(j, "rope_theta", 10000.0, file);
    c.rms_norm_eps = get_or<double>(j, "rms_norm_eps", 1e-5, file);
    c.mask_token_id = get_or<int64_t>(j, "mask_token_id", -1, file);
    c.eos_token_id = get_or<int64_t>(j, "eos_token_id", -1, file);
    c.pad_token_id = get_or<int64_t>(j, "pad_token_id", c.eos_token_id, file);
    c.bos_token_id = get_or<int64_t>(j, "bos_token_id", -1, file);
    c.weight_tying = get_or<bool>(j, "weight_tying", false, file);
    if (get_or<bool>(j, "alibi", false, file))
        throw InputError(file, "ALiBi position encoding is not supported (expected RoPE)");
    const auto act = get_or<std::string>(j, "activation_type", "silu", file);
    if (act != "silu" && act != "swiglu")
        throw InputError(file, "activation_type '" + act + "' is not supported (expected silu)");
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

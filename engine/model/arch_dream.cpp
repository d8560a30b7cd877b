// Dream (Ye et al. 2025): a Qwen2 decoder without its causal mask. Pre-norm RMSNorm, q/k/v
// projections with biases, grouped-query attention (28 query heads over 4 key/value heads in the
// 7B), NeoX RoPE with the config's theta, SwiGLU MLP, untied head. Dream was initialised from an
// autoregressive model, so its logits are shifted: the prediction for position i is row i - 1.
// Config keys and tensor names as in Dream-org/Dream-v0-Instruct-7B (Qwen2's names under
// `model.`, head `lm_head`).
#include "engine/model/arch_dream.h"

#include "engine/model/config_json.h"

namespace cl::detail {
namespace {

// Qwen2 options Dream's checkpoints leave off; a folder that turns one on is refused rather than
// run wrong.
void refuse_unsupported(const nlohmann::json& j, const std::filesystem::path& file) {
    if (get_or<bool>(j, "use_sliding_window", false, file))
        throw InputError(file, "use_sliding_window is not supported (attention is over every row)");
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
        throw InputError(file, "rope_scaling is not supported (plain RoPE only)");
    const auto act = get_or<std::string>(j, "hidden_act", "silu", file);
    if (act != "silu")
        throw InputError(file, "hidden_act '" + act + "' is not supported (expected silu)");
}

}  // namespace

ModelConfig read_dream_config(const nlohmann::json& j, const std::filesystem::path& file) {
    refuse_unsupported(j, file);
    ModelConfig c;
    c.model_type = get_or<std::string>(j, "model_type", "Dream", file);
    c.d_model = get_or<int64_t>(j, "hidden_size", 0, file);
    c.n_heads = get_or<int64_t>(j, "num_attention_heads", 0, file);
    c.n_kv_heads = get_or<int64_t>(j, "num_key_value_heads", c.n_heads, file);
    c.n_layers = get_or<int64_t>(j, "num_hidden_layers", 0, file);
    c.mlp_hidden_size = get_or<int64_t>(j, "intermediate_size", 0, file);
    c.vocab_size = get_or<int64_t>(j, "vocab_size", 0, file);
    c.max_sequence_length = get_or<int64_t>(j, "max_position_embeddings", 32768, file);
    c.rope_theta = get_or<double>(j, "rope_theta", 10000.0, file);
    c.rms_norm_eps = get_or<double>(j, "rms_norm_eps", 1e-6, file);
    c.mask_token_id = get_or<int64_t>(j, "mask_token_id", -1, file);
    c.eos_token_id = get_or<int64_t>(j, "eos_token_id", -1, file);
    c.pad_token_id = get_or<int64_t>(j, "pad_token_id", c.eos_token_id, file);
    c.bos_token_id = get_or<int64_t>(j, "bos_token_id", -1, file);
    c.weight_tying = get_or<bool>(j, "tie_word_embeddings", false, file);
    c.qkv_bias = true;  // Qwen2's q/k/v projections always carry biases
    return c;
}

nlohmann::json write_dream_config(const ModelConfig& c) {
    return {
        {"architectures", {"DreamModel"}},
        {"model_type", c.model_type},
        {"hidden_size", c.d_model},
        {"num_attention_heads", c.n_heads},
        {"num_key_value_heads", c.n_kv_heads},
        {"num_hidden_layers", c.n_layers},
        {"intermediate_size", c.mlp_hidden_size},
        {"vocab_size", c.vocab_size},
        {"max_position_embeddings", c.max_sequence_length},
        {"rope_theta", c.rope_theta},
        {"rms_norm_eps", c.rms_norm_eps},
        {"mask_token_id", c.mask_token_id},
        {"eos_token_id", c.eos_token_id},
        {"pad_token_id", c.pad_token_id},
        {"bos_token_id", c.bos_token_id},
        {"tie_word_embeddings", c.weight_tying},
        {"hidden_act", "silu"},
        {"attention_dropout", 0.0},
        {"rope_scaling", nullptr},
        {"use_sliding_window", false},
        {"sliding_window", nullptr},
        {"torch_dtype", "bfloat16"},
    };
}

std::vector<WeightSlot> dream_weight_slots(const ModelConfig& c, TransformerWeights& w) {
    const int64_t D = c.d_model, Dh = c.head_dim(), F = c.mlp_hidden_size, V = c.vocab_size;
    const int64_t q_dim = c.n_heads * Dh, kv_dim = c.n_kv_heads * Dh;
    std::vector<WeightSlot> s;
    s.push_back({"model.embed_tokens.weight", {V, D}, &w.wte});
    for (size_t i = 0; i < w.layers.size(); ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        auto& l = w.layers[i];
        s.push_back({p + "input_layernorm.weight", {D}, &l.attn_norm});
        s.push_back({p + "self_attn.q_proj.weight", {q_dim, D}, &l.q_proj});
        s.push_back({p + "self_attn.q_proj.bias", {q_dim}, &l.q_bias});
        s.push_back({p + "self_attn.k_proj.weight", {kv_dim, D}, &l.k_proj});
        s.push_back({p + "self_attn.k_proj.bias", {kv_dim}, &l.k_bias});
        s.push_back({p + "self_attn.v_proj.weight", {kv_dim, D}, &l.v_proj});
        s.push_back({p + "self_attn.v_proj.bias", {kv_dim}, &l.v_bias});
        s.push_back({p + "self_attn.o_proj.weight", {D, q_dim}, &l.attn_out});
        s.push_back({p + "post_attention_layernorm.weight", {D}, &l.ff_norm});
        s.push_back({p + "mlp.gate_proj.weight", {F, D}, &l.ff_proj});
        s.push_back({p + "mlp.up_proj.weight", {F, D}, &l.up_proj});
        s.push_back({p + "mlp.down_proj.weight", {D, F}, &l.ff_out});
    }
    s.push_back({"model.norm.weight", {D}, &w.ln_f});
    if (!c.weight_tying) s.push_back({"lm_head.weight", {V, D}, &w.head});
    return s;
}

// ChatML as in Dream-v0-Instruct-7B's tokenizer_config.json: a default system turn, the user's
// turn, and the assistant's turn opened.
namespace {
const char* const kDefaultSystemTurn =
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
}

std::string dream_chat_template(const Tokenizer& /*tokenizer*/, const std::string& user_message) {
    return std::string(kDefaultSystemTurn)
        .append("<|im_start|>user\n")
        .append(user_message)
        .append("<|im_end|>\n<|im_start|>assistant\n");
}

Architecture dream_architecture() {
    Architecture a;
    a.name = "dream";
    a.model_types = {"Dream", "dream"};
    a.hf_classes = {"DreamModel"};
    a.logits_shift = 1;
    a.read_config = read_dream_config;
    a.write_config = write_dream_config;
    a.weight_slots = dream_weight_slots;
    a.chat_template = dream_chat_template;
    a.chat_tokens = {"<|im_start|>", "<|im_end|>"};
    a.end_of_turn = "<|im_end|>";
    a.system_turn = kDefaultSystemTurn;
    // Dream added <|beginoftext|> and <|mask|> to Qwen2.5's vocabulary.
    a.special_tokens = {"<|beginoftext|>", "<|endoftext|>", "<|mask|>", "<|im_start|>",
                        "<|im_end|>"};
    return a;
}

}  // namespace cl::detail

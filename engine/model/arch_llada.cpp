// LLaDA (Nie et al. 2025): pre-norm RMSNorm, separate q/k/v without biases, NeoX RoPE,
// bidirectional attention with optional grouped-query heads, SwiGLU MLP, untied head; row i
// predicts token i. Config keys and tensor names as in GSAI-ML/LLaDA-8B-Instruct.
#include "engine/model/arch_llada.h"

#include "engine/model/config_json.h"
#include "engine/tokenizer/bpe_trainer.h"

namespace cl::detail {

ModelConfig read_llada_config(const nlohmann::json& j, const std::filesystem::path& file) {
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
    c.qkv_bias = get_or<bool>(j, "include_qkv_bias", false, file);
    if (get_or<bool>(j, "alibi", false, file))
        throw InputError(file, "ALiBi position encoding is not supported (expected RoPE)");
    const auto act = get_or<std::string>(j, "activation_type", "silu", file);
    if (act != "silu" && act != "swiglu")
        throw InputError(file, "activation_type '" + act + "' is not supported (expected silu)");
    return c;
}

nlohmann::json write_llada_config(const ModelConfig& c) {
    return {
        {"architectures", {"LLaDAModelLM"}},
        {"model_type", c.model_type},
        {"d_model", c.d_model},
        {"n_heads", c.n_heads},
        {"n_kv_heads", c.n_kv_heads},
        {"n_layers", c.n_layers},
        {"mlp_hidden_size", c.mlp_hidden_size},
        {"mlp_ratio", c.d_model ? c.mlp_hidden_size / c.d_model : 0},
        {"vocab_size", c.vocab_size},
        {"embedding_size", c.vocab_size},
        {"max_sequence_length", c.max_sequence_length},
        {"rope_theta", c.rope_theta},
        {"rms_norm_eps", c.rms_norm_eps},
        {"mask_token_id", c.mask_token_id},
        {"eos_token_id", c.eos_token_id},
        {"pad_token_id", c.pad_token_id},
        {"bos_token_id", c.bos_token_id},
        {"weight_tying", c.weight_tying},
        {"activation_type", "silu"},
        {"block_type", "llama"},
        {"layer_norm_type", "rms"},
        {"rope", true},
        {"alibi", false},
        {"include_bias", false},
        {"include_qkv_bias", c.qkv_bias},
    };
}

std::vector<WeightSlot> llada_weight_slots(const ModelConfig& c, TransformerWeights& w) {
    const int64_t D = c.d_model, Dh = c.head_dim(), F = c.mlp_hidden_size, V = c.vocab_size;
    const int64_t q_dim = c.n_heads * Dh, kv_dim = c.n_kv_heads * Dh;
    std::vector<WeightSlot> s;
    s.push_back({"model.transformer.wte.weight", {V, D}, &w.wte});
    for (size_t i = 0; i < w.layers.size(); ++i) {
        const std::string p = "model.transformer.blocks." + std::to_string(i) + ".";
        auto& l = w.layers[i];
        s.push_back({p + "attn_norm.weight", {D}, &l.attn_norm});
        s.push_back({p + "q_proj.weight", {q_dim, D}, &l.q_proj});
        s.push_back({p + "k_proj.weight", {kv_dim, D}, &l.k_proj});
        s.push_back({p + "v_proj.weight", {kv_dim, D}, &l.v_proj});
        if (c.qkv_bias) {
            s.push_back({p + "q_proj.bias", {q_dim}, &l.q_bias});
            s.push_back({p + "k_proj.bias", {kv_dim}, &l.k_bias});
            s.push_back({p + "v_proj.bias", {kv_dim}, &l.v_bias});
        }
        s.push_back({p + "attn_out.weight", {D, q_dim}, &l.attn_out});
        s.push_back({p + "ff_norm.weight", {D}, &l.ff_norm});
        s.push_back({p + "ff_proj.weight", {F, D}, &l.ff_proj});
        s.push_back({p + "up_proj.weight", {F, D}, &l.up_proj});
        s.push_back({p + "ff_out.weight", {D, F}, &l.ff_out});
    }
    s.push_back({"model.transformer.ln_f.weight", {D}, &w.ln_f});
    if (!c.weight_tying) s.push_back({"model.transformer.ff_out.weight", {V, D}, &w.head});
    return s;
}

std::string llada_chat_template(const Tokenizer& tokenizer, const std::string& user_message) {
    std::string s;
    if (tokenizer.token_to_id("<|startoftext|>")) s += "<|startoftext|>";
    s += "<|start_header_id|>user<|end_header_id|>\n\n";
    s += user_message;
    s += "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
    return s;
}

Architecture llada_architecture() {
    Architecture a;
    a.name = "llada";
    a.model_types = {"llada"};
    a.hf_classes = {"LLaDAModelLM"};
    a.logits_shift = 0;
    a.read_config = read_llada_config;
    a.write_config = write_llada_config;
    a.weight_slots = llada_weight_slots;
    a.chat_template = llada_chat_template;
    a.chat_tokens = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
    a.end_of_turn = "<|eot_id|>";
    a.special_tokens = {SpecialTokens::kBos, SpecialTokens::kEos, SpecialTokens::kMask,
                        SpecialTokens::kStartHeader, SpecialTokens::kEot};
    return a;
}

}  // namespace cl::detail

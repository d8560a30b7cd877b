// config.json of the real checkpoints as published on Hugging Face, for the tests that check
// CacheLens reads their folders unmodified (LLaDA: the
// fields listed in design/reference/peer-implementations.md section 1.6; Dream: its model page).
#pragma once

namespace cl::test {

// Dream-org/Dream-v0-Instruct-7B's config.json as published (auto_map is for Python's
// trust_remote_code and is ignored).
inline constexpr const char* kDream7BConfig = R"({
  "architectures": ["DreamModel"],
  "attention_dropout": 0.0,
  "auto_map": {"AutoConfig": "configuration_dream.DreamConfig",
               "AutoModel": "modeling_dream.DreamModel"},
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 3584,
  "initializer_range": 0.02,
  "intermediate_size": 18944,
  "mask_token_id": 151666,
  "max_position_embeddings": 131072,
  "max_window_layers": 28,
  "model_type": "Dream",
  "num_attention_heads": 28,
  "num_hidden_layers": 28,
  "num_key_value_heads": 4,
  "pad_token_id": 151643,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.46.2",
  "use_cache": false,
  "use_sliding_window": false,
  "vocab_size": 152064
})";

// GSAI-ML/LLaDA-8B-Instruct's config.json (LLaDA-8B-Base and GSAI-ML/LLaDA-1.5 are identical in
// every field CacheLens reads).
inline constexpr const char* kLlada8BConfig = R"({
  "activation_type": "silu", "alibi": false,
  "architectures": ["LLaDAModelLM"], "attention_dropout": 0.0, "attention_layer_norm": false,
  "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig",
               "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
               "AutoModel": "modeling_llada.LLaDAModelLM"},
  "bias_for_layer_norm": false, "block_group_size": 1, "block_type": "llama", "d_model": 4096,
  "embedding_dropout": 0.0, "embedding_size": 126464, "eos_token_id": 126081,
  "flash_attention": false, "include_bias": false, "include_qkv_bias": false,
  "init_fn": "mitchell",
  "input_emb_norm": false, "layer_norm_type": "rms", "layer_norm_with_affine": true,
  "mask_token_id": 126336, "max_sequence_length": 4096, "mlp_hidden_size": 12288,
  "mlp_ratio": 4, "model_type": "llada", "multi_query_attention": null, "n_heads": 32,
  "n_kv_heads": 32, "n_layers": 32, "pad_token_id": 126081, "precision": "amp_bf16",
  "residual_dropout": 0.0, "rms_norm_eps": 1e-05, "rope": true, "rope_full_precision": true,
  "rope_theta": 500000.0, "scale_logits": false,
  "use_cache": false, "vocab_size": 126464, "weight_tying": false
})";

}  // namespace cl::test

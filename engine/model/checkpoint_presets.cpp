#include "engine/model/checkpoint_presets.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/base/errors.h"
#include "engine/model/architecture.h"
#include "engine/model/config_json.h"
#include "engine/model/weights_io.h"
#include "engine/tokenizer/bpe_trainer.h"

namespace cl {
namespace {

using json = nlohmann::json;

// GSAI-ML/LLaDA-8B-Instruct's config.json (design/reference/peer-implementations.md 1.6);
// LLaDA-8B-Base and LLaDA-1.5 are identical in every field CacheLens reads.
constexpr const char* kLlada8BConfig = R"({
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

// Dream-org/Dream-v0-Instruct-7B's config.json (auto_map is for Python's trust_remote_code and
// is ignored with a note); the Base model's matches it in every field CacheLens reads.
constexpr const char* kDream7BConfig = R"({
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

// LLaDA's special tokens (126346/126347 as the reference scripts use them; see
// peer-implementations.md on what is verified).
const std::vector<std::pair<std::string, int32_t>> kLladaTokens = {
    {"<|startoftext|>", 126080},     {"<|endoftext|>", 126081},     {"<|mdm_mask|>", 126336},
    {"<|start_header_id|>", 126346}, {"<|end_header_id|>", 126347}, {"<|eot_id|>", 126348}};
// Qwen2.5's ChatML tokens plus the two Dream added.
const std::vector<std::pair<std::string, int32_t>> kDreamTokens = {{"<|endoftext|>", 151643},
                                                                   {"<|im_start|>", 151644},
                                                                   {"<|im_end|>", 151645},
                                                                   {"<|beginoftext|>", 151665},
                                                                   {"<|mask|>", 151666}};

// The split regexes of Llama-3's and Qwen2's tokenizer.json (Qwen2 splits numbers into single
// digits, Llama-3 into runs of up to three).
constexpr const char* kLlama3Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

json byte_level_pre_tokenizer(const char* split) {
    return {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"},
               {"pattern", {{"Regex", split}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"},
               {"add_prefix_space", false},
               {"trim_offsets", false},
               {"use_regex", false}}}}};
}

// The shrunk variant's sizes: two blocks of width 64, four heads (two K/V heads where the
// checkpoint uses grouped-query attention); vocabulary, special ids, RoPE and norms as published.
ModelConfig shrunk(ModelConfig c) {
    const bool gqa = c.n_kv_heads < c.n_heads;
    c.n_layers = 2;
    c.d_model = 64;
    c.n_heads = 4;
    c.n_kv_heads = gqa ? 2 : 4;
    c.mlp_hidden_size = 192;
    return c;
}

// The published config.json with the shrunk sizes written over the keys that hold them.
std::string shrunk_config_json(const CheckpointPreset& p, const detail::Architecture& arch,
                               const ModelConfig& small) {
    json published = json::parse(p.config_json);
    const json sized = arch.write_config(small);
    for (auto it = sized.begin(); it != sized.end(); ++it)
        if (published.contains(it.key()) && published[it.key()] != it.value() &&
            it.value().is_number_integer())
            published[it.key()] = it.value();
    return published.dump(2);
}

void write_text(const std::filesystem::path& file, const std::string& text) {
    std::ofstream out(file, std::ios::binary);
    out << text;
    if (!out) throw InputError(file, "cannot write");
}

}  // namespace

const std::vector<CheckpointPreset>& checkpoint_presets() {
    static const std::vector<CheckpointPreset> presets = {
        {"llada-8b-base", "GSAI-ML/LLaDA-8B-Base", kLlada8BConfig, kLladaTokens, "llama3"},
        {"llada-8b-instruct", "GSAI-ML/LLaDA-8B-Instruct", kLlada8BConfig, kLladaTokens, "llama3"},
        {"llada-1.5", "GSAI-ML/LLaDA-1.5", kLlada8BConfig, kLladaTokens, "llama3"},
        {"dream-7b-base", "Dream-org/Dream-v0-Base-7B", kDream7BConfig, kDreamTokens, "qwen2"},
        {"dream-7b-instruct", "Dream-org/Dream-v0-Instruct-7B", kDream7BConfig, kDreamTokens,
         "qwen2"},
    };
    return presets;
}

std::string checkpoint_preset_names() {
    std::string names;
    for (const auto& p : checkpoint_presets()) names += (names.empty() ? "" : ", ") + p.name;
    return names;
}

const CheckpointPreset& find_checkpoint_preset(const std::string& name) {
    for (const auto& p : checkpoint_presets())
        if (p.name == name) return p;
    throw InputError(Setting{"preset"}, "'" + name + "' is not a known checkpoint (known: " +
                                            checkpoint_preset_names() + ")");
}

std::string preset_tokenizer_json(const CheckpointPreset& p) {
    json j = json::parse(make_byte_level_tokenizer_json());
    json added = json::array();
    for (const auto& [content, id] : p.special_tokens)
        added.push_back({{"id", id},
                         {"content", content},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    j["added_tokens"] = added;
    const bool qwen2 = p.tokenizer_pipeline == "qwen2";
    j["normalizer"] = qwen2 ? json{{"type", "NFC"}} : json();
    j["pre_tokenizer"] = byte_level_pre_tokenizer(qwen2 ? kQwen2Split : kLlama3Split);
    j["decoder"] = {{"type", "ByteLevel"},
                    {"add_prefix_space", true},
                    {"trim_offsets", true},
                    {"use_regex", true}};
    const json byte_level = {{"type", "ByteLevel"},
                             {"add_prefix_space", false},
                             {"trim_offsets", false},
                             {"use_regex", true}};
    if (qwen2) {
        j["post_processor"] = byte_level;
    } else {  // Llama-3 style: the BOS template
        const auto bos = p.special_tokens.front();
        const json bos_piece = {{"SpecialToken", {{"id", bos.first}, {"type_id", 0}}}};
        const json sequence = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
        j["post_processor"] = {
            {"type", "Sequence"},
            {"processors",
             {byte_level,
              {{"type", "TemplateProcessing"},
               {"single", {bos_piece, sequence}},
               {"pair",
                {bos_piece, sequence, bos_piece, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
               {"special_tokens",
                {{bos.first,
                  {{"id", bos.first}, {"ids", {bos.second}}, {"tokens", {bos.first}}}}}}}}}};
    }
    return j.dump(2);
}

ModelConfig write_preset_folder(const std::filesystem::path& dir, const CheckpointPreset& p,
                                const PresetFolderOptions& o) {
    std::filesystem::create_directories(dir);
    const auto config_file = dir / "config.json";
    const json published = json::parse(p.config_json);
    const auto& arch = detail::find_architecture(published, config_file);
    ModelConfig c = arch.read_config(published, config_file);
    if (o.shrink) c = shrunk(c);
    write_text(config_file, o.shrink ? shrunk_config_json(p, arch, c) : std::string(p.config_json));
    write_text(dir / "tokenizer.json", preset_tokenizer_json(p));
    write_text(dir / "generation_config.json",
               json{{"bos_token_id", c.bos_token_id >= 0 ? json(c.bos_token_id) : json()},
                    {"eos_token_id", c.eos_token_id},
                    {"pad_token_id", c.pad_token_id}}
                   .dump(2));
    c = load_model_config(dir);
    if (o.shrink) {
        torch::manual_seed(o.seed);
        detail::TransformerWeights w = detail::init_weights(c);
        detail::save_weights(dir, c, w, StorageDType::BF16, o.shards);
    } else {
        detail::write_sparse_weights(dir, c, "BF16", o.shards, o.random, o.seed);
    }
    return c;
}

}  // namespace cl

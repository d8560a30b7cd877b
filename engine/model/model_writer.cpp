#include "engine/model/model_writer.h"

#include <torch/torch.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "engine/base/errors.h"
#include "engine/model/architecture.h"
#include "engine/model/safetensors.h"
#include "engine/model/transformer.h"
#include "engine/model/weights_io.h"
#include "engine/tokenizer/tokenizer.h"

namespace cl {

StorageDType parse_storage_dtype(const std::string& text) {
    if (text == "f32" || text == "float32") return StorageDType::F32;
    if (text == "f16" || text == "float16") return StorageDType::F16;
    if (text == "bf16" || text == "bfloat16") return StorageDType::BF16;
    throw InputError(Setting{"dtype"}, "expected f32, f16 or bf16, got '" + text + "'");
}

ModelConfig tiny_config(int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads) {
    ModelConfig c;
    c.d_model = d_model;
    c.n_layers = n_layers;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.mlp_hidden_size = d_model * 2;
    c.vocab_size = 0;  // filled from the tokenizer
    c.max_sequence_length = 4096;
    c.rope_theta = 10000.0;
    return c;
}

void set_architecture(ModelConfig& config, const std::string& name) {
    const auto* arch = detail::find_architecture(name);
    if (!arch) {
        std::string known;
        for (const auto& n : detail::architecture_names()) known += (known.empty() ? "" : ", ") + n;
        throw InputError(Setting{"arch"},
                         "'" + name + "' is not a known architecture (known: " + known + ")");
    }
    config.architecture = arch->name;
    config.model_type = arch->model_types.front();
    // The fields an architecture fixes whatever the caller set (Dream's q/k/v biases), as its
    // loader will read them back.
    const NoiseProcess noise = config.noise_process;
    config = arch->read_config(arch->write_config(config), "config.json");
    config.architecture = arch->name;
    config.logits_shift = arch->logits_shift;
    config.noise_process = noise;
}

ModelConfig init_random_model(const std::filesystem::path& dir, ModelConfig config, uint64_t seed,
                              StorageDType dtype, int shards) {
    std::filesystem::create_directories(dir);
    const std::string tok_text = make_byte_level_tokenizer_json();
    auto tok = Tokenizer::from_json_text(tok_text, (dir / "tokenizer.json").string());
    config.vocab_size = std::max<int64_t>(config.vocab_size, tok->vocab_size());
    config.mask_token_id = tok->required_token_id(SpecialTokens::kMask);
    config.eos_token_id = tok->required_token_id(SpecialTokens::kEos);
    config.pad_token_id = config.eos_token_id;
    config.bos_token_id = tok->required_token_id(SpecialTokens::kBos);
    config.validate(dir / "config.json");
    {
        std::ofstream out(dir / "tokenizer.json");
        out << tok_text;
    }
    {
        std::ofstream out(dir / "config.json");
        out << config.to_json();
    }
    // As the loader will read it: an architecture fixes some fields whatever the caller set
    // (Dream's q/k/v projections always have biases), and the weights must match.
    config = load_model_config(dir);
    torch::manual_seed(seed);
    detail::TransformerWeights w = detail::init_weights(config);
    detail::save_weights(dir, config, w, dtype, shards);
    return config;
}

}  // namespace cl

// Architectures as plug-ins: one small file per model family declares how its config.json is
// read and written, what its weight tensors are called, its chat template and whether its logits
// are shifted (row i predicts token i+1, as in models adapted from autoregressive ones). The
// table is keyed by config.json's `model_type` and `architectures`; LLaDA is the first entry.
// Internal to the engine: includes <torch/torch.h> through the weights.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/transformer_weights.h"
#include "engine/tokenizer/tokenizer.h"

namespace cl::detail {

// One tensor of a checkpoint: its name, the shape the config implies and where it lives.
struct WeightSlot {
    std::string name;
    std::vector<int64_t> shape;
    torch::Tensor* tensor = nullptr;
    bool optional = false;  // may be absent (e.g. an untied head when weights are tied)
};

// The special tokens of a CacheLens-made tokenizer for the architecture, by role (the names its
// published checkpoints use). A tokenizer converted between architectures keeps each role's id.
struct SpecialTokenNames {
    std::string bos, eos, mask;
    std::string turn_start;  // opens a chat turn
    std::string turn_end;    // closes a chat turn
};

struct Architecture {
    std::string name;                      // "llada"
    std::vector<std::string> model_types;  // config.json `model_type` values it accepts
    std::vector<std::string> hf_classes;   // config.json `architectures` entries it accepts
    // Row i of the output predicts token i + logits_shift (0: LLaDA; 1: AR-adapted models).
    int logits_shift = 0;
    // Reads the hyper-parameters; throws InputError naming `file` for missing or bad fields.
    std::function<ModelConfig(const nlohmann::json& j, const std::filesystem::path& file)>
        read_config;
    std::function<nlohmann::json(const ModelConfig&)> write_config;
    // Every tensor of the checkpoint, in checkpoint order, bound to `weights` (resized by caller).
    std::function<std::vector<WeightSlot>(const ModelConfig&, TransformerWeights& weights)>
        weight_slots;
    // The user message wrapped in the model's chat format (special tokens as text).
    std::function<std::string(const Tokenizer& tokenizer, const std::string& user_message)>
        chat_template;
    // The special tokens the template needs: without them in tokenizer.json (a base model's or a
    // test model's tokenizer) the prompt is used as it is.
    std::vector<std::string> chat_tokens;
    std::string end_of_turn;  // the token that closes a chat turn ("" = none)
    // The fixed turn the template opens with (ChatML's default system prompt; "" = none): the rows
    // `--fresh-prefix system` keeps fresh.
    std::string system_turn;
    SpecialTokenNames special_tokens;
};

// Adds an architecture to the table (LLaDA is built in); a name already present is replaced.
void register_architecture(Architecture arch);
// The entry for a config.json (by `model_type`, then `architectures`); throws InputError naming
// `file` and the known names when none matches.
const Architecture& find_architecture(const nlohmann::json& config,
                                      const std::filesystem::path& file);
const Architecture* find_architecture(const std::string& name);
std::vector<std::string> architecture_names();

}  // namespace cl::detail

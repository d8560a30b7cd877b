// The Dream architecture (Dream-org/Dream-v0-Base-7B and -Instruct-7B, adapted from Qwen2.5-7B),
// public so that tests and presets can name its pieces.
#pragma once

#include "engine/model/architecture.h"
#include "engine/tokenizer/tokenizer.h"

namespace cl::detail {

ModelConfig read_dream_config(const nlohmann::json& j, const std::filesystem::path& file);
nlohmann::json write_dream_config(const ModelConfig& c);
std::vector<WeightSlot> dream_weight_slots(const ModelConfig& c, TransformerWeights& w);
std::string dream_chat_template(const Tokenizer& tokenizer, const std::string& user_message);
Architecture dream_architecture();

}  // namespace cl::detail

// The LLaDA architecture's pieces, public so that a related architecture (e.g. the test-only
// biased, shifted variant in tests/) can reuse them.
#pragma once

#include "engine/model/architecture.h"
#include "engine/tokenizer/tokenizer.h"

namespace cl::detail {

ModelConfig read_llada_config(const nlohmann::json& j, const std::filesystem::path& file);
nlohmann::json write_llada_config(const ModelConfig& c);
std::vector<WeightSlot> llada_weight_slots(const ModelConfig& c, TransformerWeights& w);
std::string llada_chat_template(const Tokenizer& tokenizer, const std::string& user_message);
Architecture llada_architecture();

}  // namespace cl::detail

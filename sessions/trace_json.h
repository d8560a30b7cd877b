// JSON forms of trace records shared by every writer (session files, JSON-lines traces), so the
// field names and the NaN -> null rule are defined once.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "engine/trace/trace_types.h"

namespace cl::sessions {

nlohmann::json triggers_to_json(const std::vector<trace::TriggerEvent>& triggers);
nlohmann::json token_text_to_json(const std::map<int32_t, std::string>& text);
// The run summary: status, steps, tokens, time, FLOPs, recompute fraction, final tokens and text.
nlohmann::json summary_to_json(const trace::RunSummary& summary);

}  // namespace cl::sessions

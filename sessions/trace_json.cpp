#include "sessions/trace_json.h"

#include <cmath>

namespace cl::sessions {

namespace {
nlohmann::json finite_or_null(double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json triggers_to_json(const std::vector<trace::TriggerEvent>& triggers) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : triggers)
        out.push_back({{"kind", t.kind},
                       {"layer", t.layer},
                       {"row", t.row},
                       {"value", finite_or_null(t.value)},
                       {"threshold", finite_or_null(t.threshold)},
                       {"fired", t.fired},
                       {"action", t.action}});
    return out;
}

nlohmann::json token_text_to_json(const std::map<int32_t, std::string>& text) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [id, t] : text) j[std::to_string(id)] = t;
    return j;
}

nlohmann::json summary_to_json(const trace::RunSummary& s) {
    return {{"status", trace::to_string(s.status)},
            {"steps", s.steps},
            {"generated_tokens", s.generated_tokens},
            {"wall_ms", s.wall_ms},
            {"tokens_per_s", s.tokens_per_s},
            {"flops", s.flops},
            {"flops_full", s.flops_full},
            {"recompute_fraction", s.recompute_fraction},
            {"final_tokens", s.final_tokens},
            {"final_text", s.final_text}};
}

}  // namespace cl::sessions

#include "app/cli/jsonl_trace_sink.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/base/errors.h"
#include "sessions/trace_json.h"

namespace cl::cli {

using json = nlohmann::json;

JsonlTraceSink::JsonlTraceSink(const std::string& path)
    : m_path(path), m_out(path, std::ios::trunc) {
    if (!m_out) throw InputError(path, "cannot open for writing");
}

void JsonlTraceSink::on_run_start(const trace::RunInfo& info) {
    const json token_text = sessions::token_text_to_json(info.token_text);
    m_out << json{{"type", "run_start"},           {"run_id", info.run_id},
                  {"policy", info.policy},         {"params", info.policy_params},
                  {"sampler", info.sampler},       {"model", info.model_name},
                  {"model_hash", info.model_hash}, {"device", info.device},
                  {"threads", info.threads},       {"seed", info.seed},
                  {"prompt", info.prompt_text},    {"prompt_len", info.prompt_len},
                  {"gen_len", info.gen_len},       {"n_layers", info.n_layers},
                  {"tokens", info.initial_tokens}, {"token_text", token_text}}
                 .dump()
          << '\n';
}

void JsonlTraceSink::publish(std::shared_ptr<const trace::StepRecord> r) {
    std::vector<int> states, actions;
    for (auto s : r->states) states.push_back(static_cast<int>(s));
    for (auto a : r->actions) actions.push_back(static_cast<int>(a));
    json conf = json::array();
    for (float c : r->confidence) conf.push_back(std::isnan(c) ? json(nullptr) : json(c));
    const json triggers = sessions::triggers_to_json(r->triggers);
    const json token_text = sessions::token_text_to_json(r->new_token_text);
    m_out << json{{"type", "step"},
                  {"run_id", r->run_id},
                  {"step", r->step},
                  {"block", r->block},
                  {"tokens", r->tokens},
                  {"states", states},
                  {"predicted", r->predicted},
                  {"confidence", conf},
                  {"committed", r->committed},
                  {"actions", actions},
                  {"cache_age", r->cache_age},
                  {"triggers", triggers},
                  {"wall_ms", r->wall_ms},
                  {"layer_ms", r->layer_ms},
                  {"flops", r->flops},
                  {"flops_full", r->flops_full},
                  {"token_text", token_text}}
                 .dump()
          << '\n';
}

void JsonlTraceSink::on_run_end(int32_t run_id, const trace::RunSummary& s) {
    json end = sessions::summary_to_json(s);
    end["type"] = "run_end";
    end["run_id"] = run_id;
    end["text"] = s.final_text;  // kept for scripts written against the first format
    m_out << end.dump() << '\n';
    m_out.flush();
    if (!m_out) throw RuntimeFailure(m_path + ": write failed (disk full?)");
}

}  // namespace cl::cli

#include "app/desktop/export.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

namespace cl::app {

std::string export_metrics_csv(const std::vector<viz::RunView>& runs, const std::string& path) {
    std::ofstream out(path);
    if (!out) return path + ": cannot open for writing";
    out << "run,policy,step,block,step_in_block,seq_len,n_committed,wall_ms,flops,flops_full,"
           "recompute_fraction\n";
    for (const auto& r : runs)
        for (const auto& s : r.steps)
            out << r.info.run_id << ',' << r.info.policy << ',' << s->step << ',' << s->block << ','
                << s->step_in_block << ',' << s->seq_len << ',' << s->committed.size() << ','
                << s->wall_ms << ',' << s->flops << ',' << s->flops_full << ','
                << s->recompute_fraction() << '\n';
    out.flush();
    return out ? "" : path + ": write failed";
}

std::string export_metrics_json(const std::vector<viz::RunView>& runs, const std::string& path) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : runs) {
        nlohmann::json steps = nlohmann::json::array();
        for (const auto& s : r.steps)
            steps.push_back({{"step", s->step},
                             {"block", s->block},
                             {"n_committed", s->committed.size()},
                             {"wall_ms", s->wall_ms},
                             {"flops", s->flops},
                             {"flops_full", s->flops_full},
                             {"recompute_fraction", s->recompute_fraction()}});
        j.push_back({{"run", r.info.run_id},
                     {"policy", r.info.policy},
                     {"params", r.info.policy_params},
                     {"sampler", r.info.sampler},
                     {"prompt", r.info.prompt_text},
                     {"steps", steps}});
    }
    std::ofstream out(path);
    if (!out) return path + ": cannot open for writing";
    out << nlohmann::json{{"runs", j}}.dump(2) << '\n';
    return out ? "" : path + ": write failed";
}

}  // namespace cl::app

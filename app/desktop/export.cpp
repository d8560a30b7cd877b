#include "app/desktop/export.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "sessions/record_schema.h"
#include "sessions/step_csv.h"

namespace cl::app {

std::string export_metrics_csv(const std::vector<viz::RunView>& runs, const std::string& path) {
    std::ofstream out(path);
    if (!out) return path + ": cannot open for writing";
    sessions::write_step_csv_header(out);
    for (const auto& r : runs)
        for (const auto& s : r.steps)
            sessions::write_step_csv_row(out, r.info.run_id, r.info.policy,
                                         sessions::step_scalars_json(*s));
    out.flush();
    return out ? "" : path + ": write failed";
}

std::string export_metrics_json(const std::vector<viz::RunView>& runs, const std::string& path) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : runs) {
        nlohmann::json steps = nlohmann::json::array();
        for (const auto& s : r.steps) steps.push_back(sessions::step_scalars_json(*s));
        nlohmann::json run = sessions::to_json(r.info);
        run["steps"] = std::move(steps);
        j.push_back(std::move(run));
    }
    std::ofstream out(path);
    if (!out) return path + ": cannot open for writing";
    out << nlohmann::json{{"runs", j}}.dump(2) << '\n';
    return out ? "" : path + ": write failed";
}

}  // namespace cl::app

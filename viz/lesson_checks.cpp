#include "viz/lesson_checks.h"

#include <algorithm>

#include "engine/trace/metrics.h"
#include "viz/panels/panels.h"
#include "viz/viz_context.h"

namespace cl::viz {
namespace {

const trace::StepRecord* step_of(const RunView& run, int32_t step) {
    if (run.steps.empty()) return nullptr;
    const auto k =
        step < 0 ? run.steps.size() - 1 : std::min(static_cast<size_t>(step), run.steps.size() - 1);
    return run.steps[k].get();
}

std::string column_name(const std::vector<RunView>& runs, int column) {
    return "column " + std::to_string(column) + " (" +
           column_title(runs, runs[static_cast<size_t>(column - 1)]) + ")";
}

std::string check_against_baseline(const LessonCheck& c, const std::vector<RunView>& runs,
                                   const RunView& run, const trace::StepRecord& at, int32_t step) {
    const RunView* base = baseline_of(runs, run);
    if (!base || base == &run)
        return column_name(runs, c.column) + " has no baseline to differ from";
    const trace::StepRecord* b = step_of(*base, step);
    if (!b) return "the baseline has no steps";
    const double agreement = trace::agreement(at, *b, run.info.prompt_len);
    const bool differs = agreement < 1.0;  // NaN (nothing decoded in both) is no difference
    if (c.kind == "differs" && !differs)
        return column_name(runs, c.column) + " decodes no token that differs from the baseline";
    if (c.kind == "agrees" && differs)
        return column_name(runs, c.column) + " differs from the baseline";
    return "";
}

bool all_recomputed(const trace::StepRecord& s) {
    return std::all_of(s.actions.begin(), s.actions.end(),
                       [](trace::RowAction a) { return a == trace::RowAction::Recomputed; });
}

}  // namespace

const std::vector<std::string>& lesson_check_kinds() {
    static const std::vector<std::string> kinds{"differs", "agrees",         "trigger",
                                                "reuses",  "recomputes-all", "recompute-differs"};
    return kinds;
}

std::string evaluate_lesson_check(const LessonCheck& c, const std::vector<RunView>& runs,
                                  int32_t step) {
    const auto in_range = [&](int k) { return k >= 1 && k <= static_cast<int>(runs.size()); };
    if (!in_range(c.column))
        return "column " + std::to_string(c.column) + " does not exist (" +
               std::to_string(runs.size()) + " columns)";
    const RunView& run = runs[static_cast<size_t>(c.column - 1)];
    const trace::StepRecord* at = step_of(run, step);
    if (!at) return column_name(runs, c.column) + " has no steps";
    const std::string where = column_name(runs, c.column) + " at step " + std::to_string(at->step);
    if (c.kind == "differs" || c.kind == "agrees")
        return check_against_baseline(c, runs, run, *at, step);
    if (c.kind == "trigger") {
        const bool fired = std::any_of(at->triggers.begin(), at->triggers.end(),
                                       [](const trace::TriggerEvent& e) { return e.fired; });
        return fired ? "" : where + " fires no trigger";
    }
    if (c.kind == "reuses") return all_recomputed(*at) ? where + " recomputes every row" : "";
    if (c.kind == "recomputes-all")
        return all_recomputed(*at) ? "" : where + " is not a full forward";
    if (c.kind == "recompute-differs") {
        if (!in_range(c.other)) return "column " + std::to_string(c.other) + " does not exist";
        const trace::StepRecord* other = step_of(runs[static_cast<size_t>(c.other - 1)], step);
        if (!other) return column_name(runs, c.other) + " has no steps";
        return other->actions != at->actions
                   ? ""
                   : where + " recomputes exactly what " + column_name(runs, c.other) + " does";
    }
    return "unknown check '" + c.kind + "'";
}

}  // namespace cl::viz

// Column metrics: the one definition in engine/trace/metrics.h, over the steps a column has.
#include "viz/panels/panels.h"

namespace cl::viz {

ColumnMetrics column_metrics(const RunView& run, const RunView* base, int32_t upto) {
    const trace::RunSteps r{&run.steps, run.info.prompt_len, run.info.eos_id};
    if (!base) return trace::run_metrics(r, nullptr, upto);
    const trace::RunSteps b{&base->steps, base->info.prompt_len, base->info.eos_id};
    return trace::run_metrics(r, &b, upto);
}

}  // namespace cl::viz

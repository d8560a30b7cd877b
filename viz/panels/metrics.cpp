// Column metrics: the one definition in engine/trace/metrics.h, over the steps a column has.
#include <vector>

#include "viz/panels/panels.h"

namespace cl::viz {
namespace {

// What a column's metrics up to a step depend on: the records are immutable once published, so a
// run's first record and how many of its records there are identify them (a re-run publishes new
// ones). The header and the diff strip ask for the same metrics every frame, and each sums every
// step's per-(layer, row) actions: at the real models' shape that was most of a frame
// (cachelens-bench-viz --layers 32). The canvas is drawn on one thread only.
struct MetricsKey {
    int32_t run_id = -1, base_id = -1;  // a re-run has a new id: freed records' addresses recur
    const trace::StepRecord* run_first = nullptr;
    size_t run_count = 0;
    const trace::StepRecord* base_first = nullptr;
    size_t base_count = 0;
    int32_t upto = 0;
    bool operator==(const MetricsKey&) const = default;
};

MetricsKey key_of(const RunView& run, const RunView* base, int32_t upto) {
    MetricsKey k;
    k.run_id = run.info.run_id;
    if (base) k.base_id = base->info.run_id;
    k.run_first = run.steps.empty() ? nullptr : run.steps.front().get();
    k.run_count = run.steps.size();
    if (base) {
        k.base_first = base->steps.empty() ? nullptr : base->steps.front().get();
        k.base_count = base->steps.size();
    }
    k.upto = upto;
    return k;
}

ColumnMetrics compute(const RunView& run, const RunView* base, int32_t upto) {
    const trace::RunSteps r{&run.steps, run.info.prompt_len, run.info.eos_id};
    if (!base) return trace::run_metrics(r, nullptr, upto);
    const trace::RunSteps b{&base->steps, base->info.prompt_len, base->info.eos_id};
    return trace::run_metrics(r, &b, upto);
}

}  // namespace

ColumnMetrics column_metrics(const RunView& run, const RunView* base, int32_t upto) {
    static std::vector<std::pair<MetricsKey, ColumnMetrics>> memo;
    const MetricsKey key = key_of(run, base, upto);
    if (key.run_first)
        for (const auto& [k, m] : memo)
            if (k == key) return m;
    ColumnMetrics m = compute(run, base, upto);
    if (memo.size() >= 64) memo.clear();  // a few per column on screen
    if (key.run_first) memo.emplace_back(key, m);
    return m;
}

}  // namespace cl::viz

// The metrics of a sweep point against its baseline (the `none` point of the same model and
// device, measured in the same sweep on the same items): one definition, used by `sweep
// frontier`, `sweep status` and the app's Pareto view. Standard library only.
#pragma once

#include <cmath>
#include <vector>

#include "sweep/sweep_results.h"

namespace cl::sweep {

struct PointMetrics {
    int correct = 0, items = 0;
    double accuracy = 0, accuracy_lo = 0, accuracy_hi = 1;  // Wilson 95% interval
    double tokens_per_s = 0;  // generated tokens / step wall time over every item
    double wall_ms = 0, flops = 0;
    // Against the baseline (NaN without one; exactly 1 for the baseline itself):
    double speedup = NAN;       // baseline wall time / this point's, same items
    double flop_ratio = NAN;    // baseline FLOPs / this point's
    double efficiency = NAN;    // speedup / flop_ratio
    double agreement = NAN;     // mean share of response tokens equal to the baseline's
    int fixed = 0, broken = 0;  // items only this point / only the baseline got right
    double paired_p = 1;        // exact McNemar p of fixed vs broken
};

// The `none` point with no parameters of p's model and device; nullptr when the sweep has none.
const PointResult* baseline_of(const std::vector<PointResult>& points, const PointResult& p);

PointMetrics point_metrics(const PointResult& point, const PointResult* baseline);

// Every point's metrics against its own baseline, and whether it is on the (tokens/s, accuracy)
// frontier over all the points.
struct SweepMetrics {
    std::vector<PointMetrics> metrics;  // (points)
    std::vector<bool> frontier;         // (points)
};
SweepMetrics sweep_metrics(const std::vector<PointResult>& points);

}  // namespace cl::sweep

// The noise-agnostic caching claims, measured on recorded steps (docs/uniform-noise.md): K/V drift
// by region relative to the active block, drift against signed distance from a changed token, and
// the decode order (position against the step at which it last changed). Standard library only:
// the CLI's `drift` report and the app's drift views read the same numbers.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/trace/metrics.h"

namespace cl::trace {

// Where a row sits at a step, relative to the block being denoised.
enum class DriftRegion : uint8_t { Prompt = 0, Finished = 1, Active = 2, Future = 3 };
constexpr int kDriftRegions = 4;
const char* to_string(DriftRegion r);
DriftRegion drift_region(int32_t row, int32_t prompt_len, int32_t block_len, int32_t block);

// Running means of the four change metrics over (layer, row, step) samples.
struct DriftMeans {
    double k_cos = 0, k_rel = 0, v_cos = 0, v_rel = 0;  // sums of 1 - cos and of relative L2
    int64_t n = 0;
    void add(float kc, float kr, float vc, float vr);
    DriftMeans mean() const;  // the sums divided by n (zeros when n == 0)
};

struct DriftReport {
    std::array<DriftMeans, kDriftRegions> by_region;  // means
    int32_t max_distance = 16;
    // Index d + max_distance for signed distance d = row - nearest changed position in
    // [-max_distance, max_distance]; means.
    std::vector<DriftMeans> by_distance;
    int64_t steps = 0;  // steps with a drift measurement and changed tokens before them
    // The bin of signed distance d, |d| <= max_distance.
    const DriftMeans& at_distance(int32_t d) const {
        const int32_t bin = d + max_distance;
        return by_distance.at(static_cast<size_t>(bin));
    }
    // by_region[r] / by_region[Active] for each metric (NaN when a side has no samples).
    std::array<std::array<double, 4>, kDriftRegions> ratio_to_active() const;
};

// Every function takes the steps "up to step t" as metrics.h does: index <= upto (all when
// upto < 0), so a view at its step cursor needs no copy of the list.
//
// Accumulates the drift records of runs (steps without has_drift are skipped). The change a
// step measures was caused by the tokens committed at the step before it.
class DriftAccumulator {
public:
    explicit DriftAccumulator(int32_t max_distance = 16);
    void add_run(const RunInfo& info, const StepList& steps, int32_t upto = -1);
    DriftReport report() const;

private:
    DriftReport m_sums;
};

// The step at which each response position last changed (-1: never), from the steps' commits.
std::vector<int32_t> last_change_steps(const RunInfo& info, const StepList& steps,
                                       int32_t upto = -1);
// How left-to-right a decode order is: Spearman's rank correlation of position against the step
// of its last change, over positions that changed (1 = strictly left to right; NaN if < 2).
double left_to_right(const std::vector<int32_t>& last_change);
// How many times each response position changed (1 per commit under masked noise).
std::vector<int32_t> change_counts(const RunInfo& info, const StepList& steps, int32_t upto = -1);

}  // namespace cl::trace

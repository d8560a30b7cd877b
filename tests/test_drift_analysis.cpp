// The noise-agnostic claims' measurements (engine/trace/drift_analysis.h) on constructed records
// whose drift is known: regions, ratios, the distance profile and the decode-order measure.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/trace/drift_analysis.h"

namespace cl::trace {
namespace {

// A run of prompt 2 + 2 blocks of 3 positions, 1 layer.
RunInfo info() {
    RunInfo i;
    i.prompt_len = 2;
    i.gen_len = 6;
    i.block_len = 3;
    i.n_layers = 1;
    return i;
}

// A step in `block` whose rows drift by `k_change` (1 - cos of K) and `v_rel` (relative L2 of V).
std::shared_ptr<const StepRecord> step(int32_t index, int32_t block, std::vector<int32_t> committed,
                                       std::vector<float> k_change, std::vector<float> v_rel) {
    auto s = std::make_shared<StepRecord>();
    s->step = index;
    s->block = block;
    s->seq_len = 8;
    s->n_layers = 1;
    s->committed = std::move(committed);
    if (!k_change.empty()) {
        s->has_drift = true;
        for (float k : k_change) s->drift.k_cos.push_back(1.f - k);
        s->drift.k_rel_l2 = k_change;
        s->drift.v_cos = s->drift.k_cos;
        s->drift.v_rel_l2 = std::move(v_rel);
    }
    return s;
}

TEST(DriftAnalysis, RegionsFollowThePromptAndTheBlockBeingDenoised) {
    EXPECT_EQ(drift_region(1, 2, 3, 1), DriftRegion::Prompt);
    EXPECT_EQ(drift_region(2, 2, 3, 1), DriftRegion::Finished);
    EXPECT_EQ(drift_region(5, 2, 3, 1), DriftRegion::Active);
    EXPECT_EQ(drift_region(7, 2, 3, 1), DriftRegion::Active);
    EXPECT_EQ(drift_region(5, 2, 3, 0), DriftRegion::Future);
}

TEST(DriftAnalysis, MeansRatiosAndDistanceProfileOfAConstructedRun) {
    const float nan = std::nanf("");
    // Step 1 (block 1) measures the change caused by step 0's commit at position 6: the active
    // block (5..7) drifts 0.4 / 0.2 / 0.3, finished rows 0.01, the prompt 0.02; row 4 is not
    // computed (NaN) and must not count.
    const StepList steps{step(0, 1, {6}, {}, {}),
                         step(1, 1, {5}, {0.02f, 0.02f, 0.01f, 0.01f, nan, 0.4f, 0.2f, 0.3f},
                              {0.04f, 0.04f, 0.02f, 0.02f, nan, 0.8f, 0.4f, 0.6f})};
    DriftAccumulator acc(3);
    acc.add_run(info(), steps);
    const auto r = acc.report();
    EXPECT_EQ(r.steps, 1);
    const auto& active = r.by_region[static_cast<size_t>(DriftRegion::Active)];
    EXPECT_EQ(active.n, 3);
    EXPECT_NEAR(active.k_cos, 0.3, 1e-6);
    EXPECT_NEAR(active.v_rel, 0.6, 1e-6);
    const auto& finished = r.by_region[static_cast<size_t>(DriftRegion::Finished)];
    EXPECT_EQ(finished.n, 2);  // rows 2 and 3; row 4 was not computed
    EXPECT_NEAR(finished.k_cos, 0.01, 1e-6);
    const auto ratio = r.ratio_to_active();
    EXPECT_NEAR(ratio[static_cast<size_t>(DriftRegion::Finished)][0], 30.0, 1e-3);
    EXPECT_NEAR(ratio[static_cast<size_t>(DriftRegion::Prompt)][3], 15.0, 1e-3);
    EXPECT_TRUE(std::isnan(ratio[static_cast<size_t>(DriftRegion::Future)][0]));  // no samples
    // Distances from the changed position 6: row 6 is d = 0, row 7 is +1, row 5 is -1, row 3 -3.
    auto at = [&](int d) { return r.at_distance(d); };
    EXPECT_NEAR(at(0).k_cos, 0.2, 1e-6);
    EXPECT_NEAR(at(1).k_cos, 0.3, 1e-6);
    EXPECT_NEAR(at(-1).k_cos, 0.4, 1e-6);
    EXPECT_NEAR(at(-3).k_cos, 0.01, 1e-6);
    EXPECT_EQ(at(-2).n, 0);  // row 4: not computed
}

TEST(DriftAnalysis, DecodeOrderMeasureAndChangeCounts) {
    const RunInfo i = info();
    // Left to right: positions 2..7 last change at steps 0..5.
    StepList ltr;
    for (int32_t s = 0; s < 6; ++s) ltr.push_back(step(s, s / 3, {2 + s}, {}, {}));
    EXPECT_NEAR(left_to_right(last_change_steps(i, ltr)), 1.0, 1e-12);
    // Right to left.
    StepList rtl;
    for (int32_t s = 0; s < 6; ++s) rtl.push_back(step(s, s / 3, {7 - s}, {}, {}));
    EXPECT_NEAR(left_to_right(last_change_steps(i, rtl)), -1.0, 1e-12);
    // A uniform-noise run revises position 2 at the end: it changed twice and its last change
    // is the latest step, which lowers the measure below 1.
    StepList revised = ltr;
    revised.push_back(step(6, 1, {2}, {}, {}));
    EXPECT_EQ(change_counts(i, revised), (std::vector<int32_t>{2, 1, 1, 1, 1, 1}));
    EXPECT_EQ(last_change_steps(i, revised)[0], 6);
    EXPECT_LT(left_to_right(last_change_steps(i, revised)), 0.5);
    EXPECT_TRUE(std::isnan(left_to_right({-1, 3, -1})));
}

}  // namespace
}  // namespace cl::trace

// The one definition of the comparison metrics (engine/trace/metrics.h), on hand-built records.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/trace/metrics.h"

namespace cl::trace {
namespace {

constexpr int32_t kMask = 9, kEos = 8;

// A step of a 2-token prompt + 4-token response with `tokens` (kMask = still masked).
std::shared_ptr<const StepRecord> step(int32_t index, std::vector<int32_t> tokens,
                                       std::vector<int32_t> committed, double wall, double flops) {
    auto s = std::make_shared<StepRecord>();
    s->step = index;
    s->seq_len = static_cast<int32_t>(tokens.size());
    s->n_layers = 1;
    s->tokens = tokens;
    s->committed = std::move(committed);
    for (size_t i = 0; i < tokens.size(); ++i)
        s->states.push_back(i < 2                ? TokenState::Prompt
                            : tokens[i] == kMask ? TokenState::Masked
                                                 : TokenState::DecodedEarlier);
    s->actions.assign(tokens.size(), RowAction::Recomputed);
    s->wall_ms = wall;
    s->flops = flops;
    s->flops_full = 100;
    return s;
}

// Efficiency of any part of two runs (cachelens-bench-steps: their cached or full steps): the
// run's FLOP rate over the baseline's; NaN where either side has no time or no FLOPs.
TEST(Metrics, EfficiencyIsTheRatioOfFlopRates) {
    EXPECT_DOUBLE_EQ(efficiency(80, 10, 300, 30), (80.0 / 10.0) / (300.0 / 30.0));
    EXPECT_DOUBLE_EQ(efficiency(300, 30, 300, 30), 1.0);
    EXPECT_TRUE(std::isnan(efficiency(0, 10, 300, 30)));  // a part without cached steps
    EXPECT_TRUE(std::isnan(efficiency(80, 0, 300, 30)));
    EXPECT_TRUE(std::isnan(efficiency(80, 10, 300, 0)));
}

TEST(Metrics, SpeedupFlopRatioEfficiencyAgreementAndDivergence) {
    const StepList base{step(0, {1, 2, 5, kMask, kMask, kMask}, {2}, 10, 100),
                        step(1, {1, 2, 5, 6, kMask, kMask}, {3}, 10, 100),
                        step(2, {1, 2, 5, 6, 7, kEos}, {4, 5}, 10, 100)};
    const StepList run{step(0, {1, 2, 5, kMask, kMask, kMask}, {2}, 5, 40),
                       step(1, {1, 2, 5, 3, 7, kEos}, {3, 4, 5}, 5, 40)};
    const RunSteps b{&base, 2, kEos}, r{&run, 2, kEos};
    const auto m = run_metrics(r, &b);
    EXPECT_DOUBLE_EQ(m.wall_ms, 10);
    EXPECT_DOUBLE_EQ(m.speedup, 30.0 / 10.0);
    EXPECT_DOUBLE_EQ(m.flop_ratio, 300.0 / 80.0);
    EXPECT_DOUBLE_EQ(m.efficiency, (30.0 / 10.0) / (300.0 / 80.0));
    EXPECT_DOUBLE_EQ(m.agreement, 3.0 / 4.0);  // position 3 differs
    EXPECT_EQ(m.first_divergence, 1);
    EXPECT_EQ(m.generated, 3);  // tokens before the EOS
    EXPECT_DOUBLE_EQ(m.tokens_per_s, 3 / 0.010);
    EXPECT_DOUBLE_EQ(m.recompute, 1.0);

    // Up to step 0: each side's first step only; the baseline has decoded position 2 alone.
    const auto m0 = run_metrics(r, &b, 0);
    EXPECT_DOUBLE_EQ(m0.speedup, 10.0 / 5.0);
    EXPECT_DOUBLE_EQ(m0.agreement, 1.0);
    EXPECT_EQ(m0.first_divergence, -1);
    EXPECT_EQ(m0.generated, 1);

    // The baseline against itself, and a run without a baseline.
    const auto self = run_metrics(b, &b);
    EXPECT_DOUBLE_EQ(self.speedup, 1.0);
    EXPECT_DOUBLE_EQ(self.agreement, 1.0);
    EXPECT_TRUE(std::isnan(run_metrics(r, nullptr).speedup));
}

// The live chart's series is tokens_per_s of every prefix, built a step at a time.
TEST(Metrics, ThroughputSeriesIsTheRunsTokensPerSecondUpToEachStep) {
    const StepList base{step(0, {1, 2, 5, kMask, kMask, kMask}, {2}, 10, 100),
                        step(1, {1, 2, 5, 6, kMask, kMask}, {3}, 30, 100),
                        step(2, {1, 2, 5, 6, 7, kEos}, {4, 5}, 10, 100)};
    StepList growing(base.begin(), base.begin() + 1);
    const RunSteps partial{&growing, 2, kEos}, whole{&base, 2, kEos};
    std::vector<ThroughputSample> series;
    extend_throughput_series(partial, series);
    ASSERT_EQ(series.size(), 1u);
    growing = base;
    extend_throughput_series(partial, series);  // only the two new steps are added
    ASSERT_EQ(series.size(), 3u);
    for (int32_t t = 0; t < 3; ++t) {
        const auto m = run_metrics(whole, nullptr, t);
        EXPECT_DOUBLE_EQ(series[static_cast<size_t>(t)].tokens_per_s, m.tokens_per_s) << t;
        EXPECT_DOUBLE_EQ(series[static_cast<size_t>(t)].elapsed_s, m.wall_ms / 1000.0) << t;
        EXPECT_EQ(series[static_cast<size_t>(t)].step, t);
    }
    EXPECT_DOUBLE_EQ(series[2].tokens_per_s, 3 / 0.050);  // the EOS is not a token
}

TEST(Metrics, AgreementIgnoresPositionsMaskedOnEitherSide) {
    auto a = step(0, {1, 2, 5, kMask, 7, 7}, {}, 1, 1);
    auto b = step(0, {1, 2, 5, 6, kMask, 6}, {}, 1, 1);
    EXPECT_DOUBLE_EQ(agreement(*a, *b, 2), 1.0 / 2.0);  // positions 2 and 5 are decoded in both
    auto none = step(0, {1, 2, kMask, kMask, kMask, kMask}, {}, 1, 1);
    EXPECT_TRUE(std::isnan(agreement(*none, *b, 2)));
}

}  // namespace
}  // namespace cl::trace

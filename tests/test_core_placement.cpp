// The benches' placement probe (engine/machine/core_placement.h): a cache line's round trip between
// two pinned threads, and which round trips count as far and how the benches say so.
#include <gtest/gtest.h>

#include <thread>

#include "engine/machine/core_placement.h"

namespace {

TEST(CorePlacement, TimesARoundTripBetweenTwoCpus) {
    if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: nothing to measure";
    const double ns = cl::machine::cross_core_round_trip_ns(2, 2000);
    // A round trip is two cache-line transfers: tens of ns on one die, hundreds across two; a
    // millisecond would be a probe that waited on the scheduler, not on the line.
    EXPECT_GT(ns, 1.0);
    EXPECT_LT(ns, 1e6);
}

TEST(CorePlacement, FarIsOverTheLimitAndTheLineSaysWhichWereWhich) {
    using cl::machine::is_far;
    EXPECT_FALSE(is_far(-1));  // not measured
    EXPECT_FALSE(is_far(cl::machine::kFarRoundTripNs));
    EXPECT_TRUE(is_far(cl::machine::kFarRoundTripNs + 1));
    EXPECT_EQ(cl::machine::describe_round_trips({80, 60, 330, -1, 75}),
              "cache-line round trip near 60-80 ns (3), far 330-330 ns (1); far: over 200 ns");
    EXPECT_EQ(cl::machine::describe_round_trips({310, 352}),
              "cache-line round trip near none, far 310-352 ns (2); far: over 200 ns");
    EXPECT_EQ(cl::machine::describe_round_trips({-1}).rfind("unknown", 0), 0U);
    EXPECT_EQ(cl::machine::describe_round_trips({}).rfind("unknown", 0), 0U);
}

// A probe that waited on the scheduler (another busy process on the CPUs) makes the benches warn;
// far and near ones do not.
TEST(CorePlacement, WarnsWhereAProbeWaitedOnTheScheduler) {
    EXPECT_EQ(cl::machine::busy_warning({60, 340, -1}), "");
    EXPECT_EQ(cl::machine::busy_warning({}), "");
    const auto w = cl::machine::busy_warning({60, 8465, 340, 2500});
    EXPECT_EQ(w.rfind("warning: 2 of 4 placement probes took over 2000 ns", 0), 0U) << w;
}

// The benches' paired rounds split by placement: a round counts as far when its farthest probe
// was (one not measured counts as near), each side's median over its own rounds.
TEST(CorePlacement, PairedRoundsSplitByTheirFarthestProbe) {
    using cl::machine::PairedRound;
    const double far = cl::machine::kFarRoundTripNs + 100;
    const auto s = cl::machine::spread_of({PairedRound{0.90, 70}, PairedRound{0.70, far},
                                           PairedRound{0.86, -1}, PairedRound{0.60, far},
                                           PairedRound{0.94, 55}});
    EXPECT_DOUBLE_EQ(s.median, 0.86);
    EXPECT_DOUBLE_EQ(s.low, 0.60);
    EXPECT_DOUBLE_EQ(s.high, 0.94);
    EXPECT_EQ(s.near_rounds, 3);
    EXPECT_DOUBLE_EQ(s.near_median, 0.90);
    EXPECT_EQ(s.far_rounds, 2);
    EXPECT_DOUBLE_EQ(s.far_median, 0.65);
    EXPECT_EQ(cl::machine::median_over(s.far_median, s.far_rounds), "0.65 (2)");
    EXPECT_EQ(cl::machine::median_over(0, 0), "- (0)");
    const auto none = cl::machine::spread_of({});
    EXPECT_EQ(none.near_rounds + none.far_rounds, 0);
}

}  // namespace

// The benches' placement probe (bench/core_placement.h): a cache line's round trip between two
// pinned threads, and which round trips count as far and how the benches say so.
#include <gtest/gtest.h>

#include <thread>

#include "bench/core_placement.h"

namespace {

TEST(CorePlacement, TimesARoundTripBetweenTwoCpus) {
    if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: nothing to measure";
    const double ns = cl::bench::cross_core_round_trip_ns(2, 2000);
    // A round trip is two cache-line transfers: tens of ns on one die, hundreds across two; a
    // millisecond would be a probe that waited on the scheduler, not on the line.
    EXPECT_GT(ns, 1.0);
    EXPECT_LT(ns, 1e6);
}

TEST(CorePlacement, FarIsOverTheLimitAndTheLineSaysWhichWereWhich) {
    using cl::bench::is_far;
    EXPECT_FALSE(is_far(-1));  // not measured
    EXPECT_FALSE(is_far(cl::bench::kFarRoundTripNs));
    EXPECT_TRUE(is_far(cl::bench::kFarRoundTripNs + 1));
    EXPECT_EQ(cl::bench::describe_round_trips({80, 60, 330, -1, 75}),
              "cache-line round trip near 60-80 ns (3), far 330-330 ns (1); far: over 200 ns");
    EXPECT_EQ(cl::bench::describe_round_trips({310, 352}),
              "cache-line round trip near none, far 310-352 ns (2); far: over 200 ns");
    EXPECT_EQ(cl::bench::describe_round_trips({-1}).rfind("unknown", 0), 0U);
    EXPECT_EQ(cl::bench::describe_round_trips({}).rfind("unknown", 0), 0U);
}

}  // namespace

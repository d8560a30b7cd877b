// The benches' core-speed probe (engine/machine/core_speeds.h): one entry per CPU the process may
// run on, each CPU's probe times in order (and its probe from L3), and the warning exactly where a
// core ran below 0.9 of the best.
#include <gtest/gtest.h>
#include <sched.h>

#include "engine/machine/core_speeds.h"

namespace {

using cl::machine::CoreSpeed;

cpu_set_t this_threads_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    return set;
}

TEST(CoreSpeeds, OneEntryPerAllowedCpuItsTimesInOrder) {
    const cpu_set_t allowed = this_threads_cpus();
    const auto speeds = cl::machine::measure_core_speeds(3);
    ASSERT_EQ(static_cast<int>(speeds.size()), CPU_COUNT(&allowed));
    for (const auto& c : speeds) {
        EXPECT_TRUE(CPU_ISSET(c.cpu, &allowed)) << c.cpu;
        EXPECT_GT(c.best_us, 0);
        EXPECT_LE(c.best_us, c.median_us);
        EXPECT_LE(c.median_us, c.worst_us);
        EXPECT_GT(c.relative, 0);
        EXPECT_LE(c.relative, 1);
        EXPECT_GT(c.l3_median_us, 0);  // the weights from L3: the same work, so as slow at least
        EXPECT_DOUBLE_EQ(c.l3_slowdown, c.l3_median_us / c.median_us);
    }
}

TEST(CoreSpeeds, MeasuresOnlyTheCpusThisThreadMayUse) {
    const cpu_set_t allowed = this_threads_cpus();
    int first = 0;
    while (!CPU_ISSET(first, &allowed)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    const auto speeds = cl::machine::measure_core_speeds(2);
    ASSERT_EQ(sched_setaffinity(0, sizeof allowed, &allowed), 0);
    ASSERT_EQ(speeds.size(), 1U);
    EXPECT_EQ(speeds[0].cpu, first);
    EXPECT_DOUBLE_EQ(speeds[0].relative, speeds[0].best_us / speeds[0].median_us);
}

TEST(CoreSpeeds, WarnsExactlyWhereACoreRanBelowNineTenthsOfTheBest) {
    const std::vector<CoreSpeed> even{{0, 10, 10.5, 11, 10 / 10.5}, {1, 10, 10.8, 12, 10 / 10.8}};
    const std::vector<CoreSpeed> slow{{0, 10, 10, 11, 1.0, 12, 1.2},
                                      {1, 14, 15, 21, 10 / 15.0, 30, 2.0}};
    EXPECT_EQ(cl::machine::describe(slow),
              "cpu0 1.00 (10.0-11.0 us, L3 1.20x) cpu1 0.67 (14.0-21.0 us, L3 2.00x)");
    EXPECT_DOUBLE_EQ(cl::machine::slowest(slow), 10 / 15.0);
    EXPECT_EQ(cl::machine::before_and_after(even, even).find("in doubt"), std::string::npos);
    EXPECT_NE(cl::machine::before_and_after(even, slow).find("in doubt"), std::string::npos);
    EXPECT_NE(cl::machine::before_and_after(slow, even).find("in doubt"), std::string::npos);
    EXPECT_EQ(cl::machine::describe({}), "unknown");
    EXPECT_EQ(cl::machine::speeds_json(slow)[1]["probe_worst_us"].get<double>(), 21);
    EXPECT_EQ(cl::machine::speeds_json(slow)[1]["l3_probe_median_us"].get<double>(), 30);
    EXPECT_EQ(cl::machine::speeds_json(slow)[1]["l3_slowdown"].get<double>(), 2.0);
}

}  // namespace

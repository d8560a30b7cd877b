// run_in_phases (phased_region.h): phases in one parallel region with barriers between them. Each
// phase must see every write of the phases before it, whichever thread made it; each share must
// run once per phase; a throwing share must stop the region without leaving another waiting.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/kernels/phased_region.h"
#include "scoped_threads.h"

namespace cl {
namespace {

using detail::PhaseWork;

// Busy for `us` microseconds.
void busy_for(int64_t us) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < until) {
    }
}

// Busy for a while that differs by share, so that the shares arrive at the barriers out of order.
void stagger(int64_t share) {
    busy_for(50 * share);
}

// wait_until returns only once what it waits for holds, and sees the writes made before it did
// (the other thread's release, its acquire).
TEST(PhasedRegion, WaitUntilReturnsOnceAnotherThreadMakesItTrue) {
    std::atomic<bool> ready{false};
    int payload = 0;
    std::thread other([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        payload = 42;
        ready.store(true, std::memory_order_release);
    });
    const auto start = std::chrono::steady_clock::now();
    detail::wait_until([&] { return ready.load(std::memory_order_acquire); });
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(payload, 42);
    EXPECT_GE(waited, std::chrono::milliseconds(15)) << "returned before it held";
    other.join();
    int calls = 0;
    detail::wait_until([&] { return ++calls == 3; });
    EXPECT_EQ(calls, 3) << "asked again until it held, then not again";
}

TEST(PhasedRegion, EachPhaseSeesEveryWriteOfThePhasesBefore) {
    for (const int threads : {1, 2, 3, 4}) {
        const test::ScopedThreads scope(threads);
        const int64_t shares = detail::phase_shares();
        EXPECT_EQ(shares, threads);
        constexpr int kRounds = 50, kPhases = 4;
        for (int round = 0; round < kRounds; ++round) {
            // Phase p: each share checks that every share wrote its slot of phase p - 1, then
            // writes its own slot of phase p and counts its run.
            std::vector<std::atomic<int>> written(static_cast<size_t>(shares * kPhases));
            std::vector<std::atomic<int>> runs(static_cast<size_t>(shares * kPhases));
            std::atomic<int> unseen{0};
            std::vector<PhaseWork> phases;
            for (int p = 0; p < kPhases; ++p)
                phases.emplace_back([&, p](int64_t first, int64_t last, int64_t n) {
                    EXPECT_EQ(n, shares);
                    stagger((first + round + p) % n);
                    for (int64_t i = 0; p > 0 && i < n; ++i)
                        if (written[static_cast<size_t>((p - 1) * n + i)].load(
                                std::memory_order_relaxed) != 1)
                            ++unseen;
                    for (int64_t i = first; i < last; ++i) {
                        ++runs[static_cast<size_t>(p * n + i)];
                        written[static_cast<size_t>(p * n + i)].store(1, std::memory_order_relaxed);
                    }
                });
            detail::run_in_phases(phases);
            EXPECT_EQ(unseen.load(), 0) << threads << " threads, round " << round;
            for (const auto& r : runs) EXPECT_EQ(r.load(), 1) << threads << " threads";
        }
    }
}

TEST(PhasedRegion, AThrowingShareStopsTheRegionAndItsErrorComesBack) {
    for (const int threads : {1, 2, 3}) {
        const test::ScopedThreads scope(threads);
        for (int64_t thrower = 0; thrower < threads; ++thrower) {
            std::atomic<int> later{0};
            const std::vector<PhaseWork> phases{
                [&](int64_t first, int64_t last, int64_t) {
                    if (first <= thrower && thrower < last)
                        throw std::runtime_error("share " + std::to_string(thrower));
                    stagger(1);
                },
                [&](int64_t, int64_t, int64_t) { ++later; }};
            try {
                detail::run_in_phases(phases);
                ADD_FAILURE() << "no exception, " << threads << " threads";
            } catch (const std::runtime_error& e) {
                EXPECT_EQ(std::string(e.what()), "share " + std::to_string(thrower));
            }
            EXPECT_EQ(later.load(), 0) << "a phase after the failure ran, " << threads
                                       << " threads, share " << thrower << " threw";
        }
    }
}

TEST(PhasedRegion, InsideAnotherParallelRegionTheCallingThreadRunsEveryPhase) {
    const test::ScopedThreads scope(2);
    std::atomic<int> inline_runs{0}, inner_shares{-1};
    at::parallel_for(0, 2, 1, [&](int64_t, int64_t) {
        const auto caller = std::this_thread::get_id();
        inner_shares = static_cast<int>(detail::phase_shares());
        std::atomic<int> phase_runs{0};
        detail::run_in_phases({[&](int64_t first, int64_t last, int64_t n) {
                                   EXPECT_EQ(first, 0);
                                   EXPECT_EQ(last, n);
                                   EXPECT_EQ(std::this_thread::get_id(), caller);
                                   ++phase_runs;
                               },
                               [&](int64_t, int64_t, int64_t) { ++phase_runs; }});
        if (phase_runs == 2) ++inline_runs;
    });
    EXPECT_EQ(inner_shares.load(), 1);
    EXPECT_EQ(inline_runs.load(), 2);
}

TEST(PhasedRegion, ShareZeroRunsOnTheCallingThread) {
    for (const int threads : {1, 2, 3}) {
        const test::ScopedThreads scope(threads);
        const auto caller = std::this_thread::get_id();
        std::atomic<int> on_caller{0};
        detail::run_in_phases({[&](int64_t first, int64_t, int64_t) {
            if (first == 0 && std::this_thread::get_id() == caller) ++on_caller;
        }});
        EXPECT_EQ(on_caller.load(), 1) << threads << " threads";
    }
}

// Turns phase timing on for a scope, its sums zeroed, and off again after.
class ScopedPhaseTiming {
public:
    ScopedPhaseTiming() {
        detail::reset_phase_times();
        detail::set_phase_timing(true);
    }
    ~ScopedPhaseTiming() { detail::set_phase_timing(false); }
    ScopedPhaseTiming(const ScopedPhaseTiming&) = delete;
    ScopedPhaseTiming& operator=(const ScopedPhaseTiming&) = delete;
};

TEST(PhasedRegion, TimingPutsEachShareWorkInItsPhaseAndTheOthersWaitAtTheBarrier) {
    const test::ScopedThreads scope(2);
    const ScopedPhaseTiming timing;
    constexpr int64_t kFirstUs = 3000, kSecondUs = 2000;
    detail::run_in_phases({[&](int64_t first, int64_t, int64_t) {  // share 0 works, 1 waits
                               if (first == 0) busy_for(kFirstUs);
                           },
                           [&](int64_t first, int64_t, int64_t) {  // share 1 works, 0 waits
                               if (first == 1) busy_for(kSecondUs);
                           },
                           [](int64_t, int64_t, int64_t) {}});
    const auto t = detail::phase_times();
    EXPECT_EQ(t.regions, 1);
    EXPECT_EQ(t.phases, 3);
    EXPECT_GE(t.work_ns[0][0], kFirstUs * 1000);
    EXPECT_GE(t.work_ns[1][1], kSecondUs * 1000);
    // A share leaves a barrier only after the other has done its work before it: on one clock,
    // from the region's start.
    const auto& f = t.fork_ns;
    const auto& w = t.work_ns;
    const auto& q = t.wait_ns;
    EXPECT_GE(f[1] + w[1][0] + q[1][0], f[0] + w[0][0]);
    EXPECT_GE(f[0] + w[0][0] + q[0][0] + w[0][1] + q[0][1], f[1] + w[1][0] + q[1][0] + w[1][1]);
}

TEST(PhasedRegion, TimesOfSeveralRunsAddUp) {
    detail::PhaseTimes a, b;
    a.regions = 2;
    a.phases = 3;
    a.fork_ns[1] = 5;
    a.work_ns[1][2] = 7;
    b.regions = 1;
    b.phases = 2;
    b.work_ns[1][2] = 4;
    b.wait_ns[0][1] = 9;
    b.join_ns = 3;
    a += b;
    EXPECT_EQ(a.regions, 3);
    EXPECT_EQ(a.phases, 3);  // the most phases, not their sum
    EXPECT_EQ(a.fork_ns[1], 5);
    EXPECT_EQ(a.work_ns[1][2], 11);
    EXPECT_EQ(a.wait_ns[0][1], 9);
    EXPECT_EQ(a.join_ns, 3);
}

TEST(PhasedRegion, NothingIsTimedWithTimingOffOrOneShare) {
    detail::reset_phase_times();
    {
        const test::ScopedThreads scope(2);
        detail::run_in_phases({[](int64_t, int64_t, int64_t) {}});
    }
    EXPECT_EQ(detail::phase_times().regions, 0) << "timing off";
    const test::ScopedThreads scope(1);
    const ScopedPhaseTiming timing;
    detail::run_in_phases({[](int64_t, int64_t, int64_t) { busy_for(100); }});
    const auto t = detail::phase_times();
    EXPECT_EQ(t.regions, 0) << "one share";
    EXPECT_EQ(t.work_ns[0][0], 0);
}

}  // namespace
}  // namespace cl

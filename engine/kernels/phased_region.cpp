#include "engine/kernels/phased_region.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

namespace cl::detail {
namespace {

// Spins of a barrier wait before it yields the core: about a millisecond of pause instructions,
// more than the phases of a cached step's layer wait for one another (a few to tens of us), less
// than a time slice of a thread that needs this core to finish the share waited for.
constexpr int kSpinsBeforeYield = 20000;

void pause_briefly() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

}  // namespace

void wait_until(const std::function<bool()>& ready) {
    for (int spins = 0; !ready(); ++spins) {
        if (spins < kSpinsBeforeYield)
            pause_briefly();
        else
            std::this_thread::yield();
    }
}

namespace {

// The shares' arrivals at the ends of the phases: phase i is over for everyone once the arrivals,
// each weighted by the shares it stands for, add up to (i + 1) times the shares.
class ShareBarrier {
public:
    void arrive_and_wait(int64_t weight, int64_t target) {
        m_arrived.fetch_add(weight, std::memory_order_acq_rel);
        wait_until([&] { return m_arrived.load(std::memory_order_acquire) >= target; });
    }

private:
    std::atomic<int64_t> m_arrived{0};
};

// PhaseTimes's sums, each share's slots written by the one thread that runs the share (relaxed
// adds: a snapshot between regions, after their joins, sees them all).
using ShareSums = std::atomic<int64_t>[PhaseTimes::kTimedShares][PhaseTimes::kTimedPhases];
struct TimeSums {
    std::atomic<bool> on{false};
    std::atomic<int64_t> regions{0}, phases{0}, join{0};
    std::atomic<int64_t> fork[PhaseTimes::kTimedShares]{};
    ShareSums work{}, wait{};
};
TimeSums g_times;

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void add(std::atomic<int64_t>& sum, int64_t ns) {
    sum.fetch_add(ns, std::memory_order_relaxed);
}

// value = max(value, x), whichever thread gets there first.
void raise_to(std::atomic<int64_t>& value, int64_t x) {
    int64_t seen = value.load(std::memory_order_relaxed);
    while (seen < x && !value.compare_exchange_weak(seen, x, std::memory_order_relaxed)) {
    }
}

// One region's timer: its shares' clocks go into g_times, or nowhere when timing is off or the
// region has one share. Each returns the time it read, the start of what the share does next.
class RegionTimer {
public:
    RegionTimer(int64_t shares, size_t phases)
        : m_on(shares >= 2 && g_times.on.load(std::memory_order_relaxed)),
          m_start(m_on ? now_ns() : 0),
          m_phases(static_cast<int64_t>(phases)) {}
    bool on() const { return m_on; }
    // The share's start, from the region's.
    int64_t fork(int64_t share) const {
        const int64_t t = now_ns();
        if (share < PhaseTimes::kTimedShares) add(g_times.fork[share], t - m_start);
        return t;
    }
    // The share's time in a phase's work or barrier since `since`.
    int64_t lap(ShareSums& sums, int64_t share, size_t phase, int64_t since) const {
        const int64_t t = now_ns();
        if (share < PhaseTimes::kTimedShares && phase < PhaseTimes::kTimedPhases)
            add(sums[share][phase], t - since);
        return t;
    }
    // After the region, the last share having ended at last_end.
    void finish(int64_t last_end) const {
        add(g_times.join, now_ns() - last_end);
        g_times.regions.fetch_add(1, std::memory_order_relaxed);
        raise_to(g_times.phases, m_phases);
    }

private:
    bool m_on;
    int64_t m_start;
    int64_t m_phases;
};

}  // namespace

void set_phase_timing(bool on) {
    g_times.on.store(on, std::memory_order_relaxed);
}

PhaseTimes phase_times() {
    PhaseTimes t;
    t.regions = g_times.regions.load(std::memory_order_relaxed);
    t.phases = g_times.phases.load(std::memory_order_relaxed);
    t.join_ns = g_times.join.load(std::memory_order_relaxed);
    for (int s = 0; s < PhaseTimes::kTimedShares; ++s) {
        t.fork_ns[s] = g_times.fork[s].load(std::memory_order_relaxed);
        for (int p = 0; p < PhaseTimes::kTimedPhases; ++p) {
            t.work_ns[s][p] = g_times.work[s][p].load(std::memory_order_relaxed);
            t.wait_ns[s][p] = g_times.wait[s][p].load(std::memory_order_relaxed);
        }
    }
    return t;
}

void reset_phase_times() {
    g_times.regions = 0;
    g_times.phases = 0;
    g_times.join = 0;
    for (int s = 0; s < PhaseTimes::kTimedShares; ++s) {
        g_times.fork[s] = 0;
        for (int p = 0; p < PhaseTimes::kTimedPhases; ++p) {
            g_times.work[s][p] = 0;
            g_times.wait[s][p] = 0;
        }
    }
}

int64_t phase_shares() {
#if AT_PARALLEL_OPENMP
    return at::in_parallel_region() ? 1 : at::get_num_threads();
#else
    return 1;
#endif
}

void run_in_phases(const std::vector<PhaseWork>& phases) {
    const int64_t shares = phase_shares();
    ShareBarrier barrier;
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_lock;
    const RegionTimer timer(shares, phases.size());
    std::atomic<int64_t> last_end{0};  // the latest share's end, where timed
    // A throwing share still arrives at every barrier (the others wait there for it); no share
    // starts a phase after one has failed.
    const auto run_shares = [&](int64_t first, int64_t last) {
        int64_t t = timer.on() ? timer.fork(first) : 0;
        for (size_t i = 0; i < phases.size(); ++i) {
            if (!failed.load(std::memory_order_acquire)) {
                try {
                    phases[i](first, last, shares);
                } catch (...) {
                    const std::lock_guard<std::mutex> hold(error_lock);
                    if (!error) error = std::current_exception();
                    failed.store(true, std::memory_order_release);
                }
            }
            if (timer.on()) t = timer.lap(g_times.work, first, i, t);
            if (i + 1 < phases.size()) {
                barrier.arrive_and_wait(last - first, shares * static_cast<int64_t>(i + 1));
                if (timer.on()) t = timer.lap(g_times.wait, first, i, t);
            }
        }
        if (timer.on()) raise_to(last_end, t);
    };
    if (shares == 1)
        run_shares(0, 1);
    else
        at::parallel_for(0, shares, 1, run_shares);
    if (timer.on()) timer.finish(last_end.load(std::memory_order_relaxed));
    if (error) std::rethrow_exception(error);
}

}  // namespace cl::detail

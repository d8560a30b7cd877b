// How far apart the two CPUs a 2-thread run uses are now: the round trip of a cache line between
// threads pinned to the first two CPUs this process may run on. Why the benches measure it: a VM's
// two vCPUs may sit on one CCD (one L3: tens of ns) most of the time and on two (hundreds of ns)
// for seconds at a time, and in those seconds a cached step slows far more than `none`'s: it reads
// its layers' weights and K/V from L3 and hands rows between the threads twice a layer, where
// `none` mostly computes. The benches split each policy's paired efficiency by it. Linux only
// (sched_getaffinity); elsewhere, and with fewer than two CPUs, it measures nothing.
#pragma once

#include "engine/base/stats.h"
#include "engine/machine/cpu_pinning.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace cl::machine {

// A round trip counts as far above this: the CPUs on two dies or sockets. Same-die round trips
// run 50-90 ns here (Zen 4, one CCD), about 100-150 ns on a large Intel mesh; two CCDs here
// 310-360 ns. Not relative to the lowest seen: a whole measurement may fall in a far stretch.
constexpr double kFarRoundTripNs = 200.0;

namespace detail {

// Spins until ready() or stop(); yields the core after a while, so that a probe sharing its CPU
// with another busy thread still ends.
template <class Ready, class Stop>
void spin_until(Ready ready, Stop stop) {
    for (int spins = 0; !ready() && !stop(); ++spins)
        if (spins > 4096) std::this_thread::yield();
}

// `trips` round trips of a counter between a thread on CPU a and one on CPU b, ns each; -1 where
// a thread could not be pinned.
inline double round_trip_batch_ns(int a, int b, int trips) {
    struct alignas(64) Line {
        std::atomic<int64_t> value{0};
    };
    Line turn, failed;  // each on its own cache line
    double ns = -1;
    std::thread first([&] {
        if (!pin_this_thread_to(a)) return;
        std::thread second([&] {
            if (!pin_this_thread_to(b)) {
                failed.value.store(1);
                return;
            }
            for (int64_t i = 0; i < trips; ++i) {
                spin_until([&] { return turn.value.load(std::memory_order_acquire) == 2 * i + 1; },
                           [] { return false; });
                turn.value.store(2 * i + 2, std::memory_order_release);
            }
        });
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < trips && failed.value.load() == 0; ++i) {
            turn.value.store(2 * i + 1, std::memory_order_release);
            spin_until([&] { return turn.value.load(std::memory_order_acquire) == 2 * i + 2; },
                       [&] { return failed.value.load(std::memory_order_relaxed) != 0; });
        }
        const auto t1 = std::chrono::steady_clock::now();
        second.join();
        if (failed.value.load() == 0)
            ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / trips;
    });
    first.join();
    return ns;
}

}  // namespace detail

// The median of `batches` batches of `trips` round trips (about 1 ms a batch near, 4 ms far)
// between the first two CPUs of this thread's affinity mask, or of the machine where this thread is
// bound to one (OMP_PROC_BIND binds the thread that starts OpenMP); -1 where two threads cannot be
// pinned to two CPUs, or off Linux.
inline double cross_core_round_trip_ns(int batches = 3, int trips = 10000) {
    std::vector<int> cpus = allowed_cpus();
    if (cpus.size() < 2) cpus = {0, 1};  // pinning fails where there are no two
    std::vector<double> ns;
    for (int b = 0; b < batches; ++b) {
        const double batch = detail::round_trip_batch_ns(cpus[0], cpus[1], trips);
        if (batch <= 0) return -1;
        ns.push_back(batch);
    }
    return cl::stats::median(ns);
}

// A probe now (cross_core_round_trip_ns), appended to a bench's probes in order and returned: the
// benches probe around every run and keep every probe for their placement line and JSON.
inline double probe_round_trip_into(std::vector<double>& round_trips) {
    round_trips.push_back(cross_core_round_trip_ns());
    return round_trips.back();
}

// A round trip above this did not wait on a cache line but on the scheduler: another busy process
// shares these CPUs (two benches at once on this 2-vCPU VM read 0.8-8.5 us), and the figures
// around it are not the machine's. Two sockets stay well under it (a few hundred ns).
constexpr double kBusyRoundTripNs = 2000.0;

// Whether a round trip (-1: not measured) is far.
inline bool is_far(double round_trip_ns) {
    return round_trip_ns > kFarRoundTripNs;
}

// "cache-line round trip near 48-92 ns (19), far 311-352 ns (4); far: over 200 ns": each
// placement's range and probes; "unknown" where nothing was measured.
inline std::string describe_round_trips(const std::vector<double>& round_trips) {
    std::vector<double> near, far;
    for (double ns : round_trips)
        if (ns > 0) (is_far(ns) ? far : near).push_back(ns);
    if (near.empty() && far.empty()) return "unknown (no two CPUs to pin to, or off Linux)";
    const auto range = [](const std::vector<double>& v) {
        if (v.empty()) return std::string("none");
        const auto [low, high] = std::minmax_element(v.begin(), v.end());
        char s[64];
        std::snprintf(s, sizeof s, "%.0f-%.0f ns (%zu)", *low, *high, v.size());
        return std::string(s);
    };
    char limit[32];
    std::snprintf(limit, sizeof limit, "%.0f ns", kFarRoundTripNs);
    return "cache-line round trip near " + range(near) + ", far " + range(far) + "; far: over " +
           limit;
}

// A warning line where some probe waited on the scheduler (kBusyRoundTripNs): how many of them,
// and what it means; empty where none did.
inline std::string busy_warning(const std::vector<double>& round_trips) {
    const auto busy = std::count_if(round_trips.begin(), round_trips.end(),
                                    [](double ns) { return ns > kBusyRoundTripNs; });
    if (busy == 0) return "";
    char s[256];
    std::snprintf(s, sizeof s,
                  "warning: %zu of %zu placement probes took over %.0f ns: another process was "
                  "busy on these CPUs, so these timings are not this machine's",
                  static_cast<size_t>(busy), round_trips.size(), kBusyRoundTripNs);
    return s;
}

// A round's run of a policy against the same round's `none` run, and the farthest the two CPUs
// were apart from before the none run to after the policy's (-1 where not measured).
struct PairedRound {
    double efficiency = 0;
    double round_trip_ns = -1;
};

// The median, lowest and highest of the rounds' paired efficiencies; and the median over the
// rounds whose CPUs stayed near (or were not measured) and over those where they were far apart
// at some point, with their counts (a median of 0 over no rounds).
struct Spread {
    double median = 0, low = 0, high = 0;
    double near_median = 0, far_median = 0;
    int near_rounds = 0, far_rounds = 0;
};

inline Spread spread_of(const std::vector<PairedRound>& rounds) {
    if (rounds.empty()) return {};
    std::vector<double> all, near, far;
    for (const auto& r : rounds) {
        all.push_back(r.efficiency);
        (is_far(r.round_trip_ns) ? far : near).push_back(r.efficiency);
    }
    const auto [low, high] = std::minmax_element(all.begin(), all.end());
    const auto median_of = [](const std::vector<double>& v) {
        return v.empty() ? 0.0 : cl::stats::median(v);
    };
    return {cl::stats::median(all),
            *low,
            *high,
            median_of(near),
            median_of(far),
            static_cast<int>(near.size()),
            static_cast<int>(far.size())};
}

// A spread as the benches' JSON gives it (the `paired_efficiency` object of a policy's row).
inline nlohmann::json spread_json(const Spread& s) {
    return {{"median", s.median},
            {"low", s.low},
            {"high", s.high},
            {"near_median", s.near_median},
            {"near_rounds", s.near_rounds},
            {"far_median", s.far_median},
            {"far_rounds", s.far_rounds}};
}

// "0.86 (7)": a median and the rounds it is over; "- (0)" over none.
inline std::string median_over(double median, int rounds) {
    if (rounds == 0) return "- (0)";
    char s[32];
    std::snprintf(s, sizeof s, "%.2f (%d)", median, rounds);
    return s;
}

}  // namespace cl::machine

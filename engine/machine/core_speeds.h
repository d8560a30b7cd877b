// How fast each CPU this process may run on runs the row kernels now, relative to the fastest: a
// thread pinned to one CPU at a time times a cached step's product on it. Why the benches print
// it: a 2-thread run splits its work evenly and waits for the slower core, so where one core runs
// slower than the other (a VM whose vCPU shares its host core, a hybrid CPU's efficiency core),
// a policy's 2-thread efficiency says as much about the cores as about the policy (a shared VM's
// vCPUs can differ by half for seconds at a time). Beside it, the same product over weights that
// come from L3 (a pass over 48 of them, 8.6 MB): how much slower than from L2, where other guests
// share the L3. A cached step reads its layers' weights and K/V from L3; its slow stretches follow
// the CPUs' placement more than this probe (core_placement.h).
// Linux only (sched_getaffinity); elsewhere it measures nothing and the benches print "unknown".
#pragma once

#include "engine/base/stats.h"
#include "engine/kernels/row_gemm.h"
#include "engine/machine/cpu_pinning.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace cl::machine {

// One CPU's probe times over the rounds, and its typical speed against the best any CPU reached.
struct CoreSpeed {
    int cpu = 0;
    double best_us = 0, median_us = 0, worst_us = 0;  // the probe product's time over the rounds
    double relative = 0;      // the fastest time any CPU reached / this one's median: 1 at best
    double l3_median_us = 0;  // the probe product's time with its weights from L3, median
    double l3_slowdown = 0;   // l3_median_us / median_us: 1 where L3 serves as fast as L2
};

namespace detail {

// The probe product: the embedded model's MLP gate product on a cached step's rows, 22 x 128 @
// 128 x 352 (2 MFLOP, weights 180 KB).
constexpr int64_t kProbeRows = 22, kProbeInner = 128, kProbeColumns = 352;
constexpr int kStreamedWeights = 48;  // 8.6 MB of probe weights: beyond L2, within L3

// The probe product's operands, its weights at wt.
inline cl::detail::FewRowsProduct probe_product(const float* x, const float* wt, float* y) {
    cl::detail::FewRowsProduct p;
    p.x = x;
    p.ldx = kProbeInner;
    p.wt = wt;
    p.ldw = kProbeColumns;
    p.y = y;
    p.ldy = kProbeColumns;
    p.rows = kProbeRows;
    p.inner = kProbeInner;
    p.columns = kProbeColumns;
    return p;
}

// The probe product's time with its weights from L3: passes over kStreamedWeights weights, each
// product with the next (streamed: kStreamedWeights * K * N floats), the median of 5 passes.
inline double probe_streamed_us(const std::vector<float>& weights) {
    std::vector<float> x(kProbeRows * kProbeInner, 0.5F), y(kProbeRows * kProbeColumns);
    const auto pass = [&] {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kStreamedWeights; ++i) {
            auto p =
                probe_product(x.data(), weights.data() + i * kProbeInner * kProbeColumns, y.data());
            cl::detail::few_rows_product(p, 0, kProbeColumns);
        }
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                   .count() /
               kStreamedWeights;
    };
    pass();  // warm-up: the weights out of L2's reach, clocks up
    std::vector<double> passes(5);
    for (auto& us : passes) us = pass();
    return cl::stats::median(passes);
}

// The probe product's time with its weights in L2 (one weight, used again and again), the median
// of 5 batches of 10.
inline double probe_product_us() {
    constexpr int64_t M = kProbeRows, K = kProbeInner, N = kProbeColumns;
    std::vector<float> x(M * K, 0.5F), w(K * N, 0.25F), y(M * N);
    auto p = probe_product(x.data(), w.data(), y.data());
    cl::detail::few_rows_product(p, 0, N);  // warm-up: weights into the cache, clocks up
    std::vector<double> batches;
    for (int b = 0; b < 5; ++b) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 10; ++i) cl::detail::few_rows_product(p, 0, N);
        batches.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count() /
            10);
    }
    return cl::stats::median(batches);
}

}  // namespace detail

// Each CPU of this process's affinity mask, one at a time, in `rounds` rounds (about 1.5 ms a
// CPU a round), so that a core's speed is seen over a stretch of time, not in one instant; empty
// where the mask cannot be read or a thread cannot be pinned.
inline std::vector<CoreSpeed> measure_core_speeds(int rounds = 8) {
    std::vector<CoreSpeed> out;
    const std::vector<int> cpus = allowed_cpus();
    std::vector<std::vector<double>> times(cpus.size()), streamed(cpus.size());
    const std::vector<float> weights(
        static_cast<size_t>(detail::kStreamedWeights * detail::kProbeInner * detail::kProbeColumns),
        0.25F);
    for (int r = 0; r < rounds; ++r)
        for (size_t i = 0; i < cpus.size(); ++i) {
            double us = -1, l3_us = -1;
            std::thread probe([&] {
                if (!pin_this_thread_to(cpus[i])) return;
                us = detail::probe_product_us();
                l3_us = detail::probe_streamed_us(weights);
            });
            probe.join();
            if (us <= 0) return {};
            times[i].push_back(us);
            streamed[i].push_back(l3_us);
        }
    for (size_t i = 0; i < cpus.size(); ++i) {
        const auto [best, worst] = std::minmax_element(times[i].begin(), times[i].end());
        const double median = cl::stats::median(times[i]), l3 = cl::stats::median(streamed[i]);
        out.push_back({cpus[i], *best, median, *worst, 0, l3, l3 / median});
    }
    if (out.empty()) return out;
    const double fastest =
        std::min_element(out.begin(), out.end(), [](const auto& a, const auto& b) {
            return a.best_us < b.best_us;
        })->best_us;
    for (auto& c : out) c.relative = fastest / c.median_us;
    return out;
}

// "cpu0 0.92 (14.3-21.0 us, L3 1.12x) cpu1 0.66 (...)": each CPU's median speed against the best
// any reached, its probe's range and how much slower the probe runs from L3; or "unknown".
inline std::string describe(const std::vector<CoreSpeed>& speeds) {
    if (speeds.empty()) return "unknown";
    std::string s;
    for (const auto& c : speeds) {
        char item[96];
        std::snprintf(item, sizeof item, "%scpu%d %.2f (%.1f-%.1f us, L3 %.2fx)",
                      s.empty() ? "" : " ", c.cpu, c.relative, c.best_us, c.worst_us,
                      c.l3_slowdown);
        s += item;
    }
    return s;
}

// The slowest CPU's median speed against the best any CPU reached (1 where none was measured).
inline double slowest(const std::vector<CoreSpeed>& speeds) {
    double low = 1;
    for (const auto& c : speeds) low = std::min(low, c.relative);
    return low;
}

// The line the benches print: each CPU's speed before and after a measurement, and a warning
// where a core ran below 0.9 of the best any reached.
inline std::string before_and_after(const std::vector<CoreSpeed>& before,
                                    const std::vector<CoreSpeed>& after) {
    const bool doubt = std::min(slowest(before), slowest(after)) < 0.9;
    return "before " + describe(before) + ", after " + describe(after) +
           (doubt ? " (cores below 0.9 of their best: timings here are in doubt)" : "");
}

// As the benches' JSON records them: cpu, the probe's best, median and worst us, relative speed,
// and the probe from L3 (its median us and its slowdown against L2's).
inline nlohmann::json speeds_json(const std::vector<CoreSpeed>& speeds) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : speeds)
        out.push_back({{"cpu", c.cpu},
                       {"probe_best_us", c.best_us},
                       {"probe_median_us", c.median_us},
                       {"probe_worst_us", c.worst_us},
                       {"relative", c.relative},
                       {"l3_probe_median_us", c.l3_median_us},
                       {"l3_slowdown", c.l3_slowdown}});
    return out;
}

}  // namespace cl::machine

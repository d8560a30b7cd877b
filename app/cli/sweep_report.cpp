#include "app/cli/sweep_report.h"

#include <cstdio>
#include <map>
#include <set>

#include "sweep/frontier.h"
#include "sweep/point_metrics.h"

namespace cl::cli {
namespace {

std::string params_text(const std::map<std::string, double>& params) {
    std::string s;
    for (const auto& [k, v] : params) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s%s=%g", s.empty() ? "" : " ", k.c_str(), v);
        s += buf;
    }
    return s.empty() ? "-" : s;
}

nlohmann::json nan_to_null(double v) {
    return std::isnan(v) ? nlohmann::json() : nlohmann::json(v);
}

nlohmann::json point_json(const sweep::PointResult& p, const sweep::PointMetrics& m,
                          bool on_policy_front, bool on_overall_front) {
    return {{"key", p.key},
            {"model", p.model},
            {"device", p.device},
            {"policy", p.policy},
            {"params", p.params},
            {"items", m.items},
            {"correct", m.correct},
            {"accuracy", m.accuracy},
            {"accuracy_ci95", {m.accuracy_lo, m.accuracy_hi}},
            {"tokens_per_s", m.tokens_per_s},
            {"speedup", nan_to_null(m.speedup)},
            {"flop_ratio", nan_to_null(m.flop_ratio)},
            {"efficiency", nan_to_null(m.efficiency)},
            {"agreement", nan_to_null(m.agreement)},
            {"fixed", m.fixed},
            {"broken", m.broken},
            {"paired_p", m.paired_p},
            {"policy_frontier", on_policy_front},
            {"frontier", on_overall_front},
            {"threads", p.threads},
            {"host", p.host},
            {"finished_utc", p.finished_utc}};
}

void print_row(const sweep::PointResult& p, const sweep::PointMetrics& m, bool overall) {
    std::printf("  %c %-12s %5.1f%% [%5.1f,%5.1f] %8.1f %7.2fx %6.2fx %5.2f %6.1f%%  %s\n",
                overall ? '*' : ' ', p.policy.c_str(), 100 * m.accuracy, 100 * m.accuracy_lo,
                100 * m.accuracy_hi, m.tokens_per_s, m.speedup, m.flop_ratio, m.efficiency,
                100 * m.agreement, params_text(p.params).c_str());
}

}  // namespace

void print_sweep_status(const sweep::SweepStore& store) {
    const auto points = store.points();
    std::map<std::string, int> per_policy;
    for (const auto& p : points) ++per_policy[p.policy];
    const auto total = store.info().total_points;
    std::printf("%s: %zu of %d points finished (%.0f%%)\n", store.path().c_str(), points.size(),
                total, total ? 100.0 * static_cast<double>(points.size()) / total : 0.0);
    for (const auto& [policy, n] : per_policy) std::printf("  %-12s %d\n", policy.c_str(), n);
}

nlohmann::json print_sweep_frontier(const sweep::SweepStore& store, bool all) {
    const auto points = store.points();
    const auto swept = sweep::sweep_metrics(points);
    const auto& metrics = swept.metrics;
    std::map<std::string, std::vector<size_t>> by_policy;  // policy -> point indices
    for (size_t i = 0; i < points.size(); ++i) by_policy[points[i].policy].push_back(i);
    nlohmann::json out = {{"file", store.path()}, {"points", nlohmann::json::array()}};
    std::printf("  %c %-12s %6s %13s %8s %8s %7s %5s %7s  %s\n", ' ', "policy", "acc", "95% CI",
                "tok/s", "speedup", "FLOPx", "eff", "agree", "parameters");
    for (const auto& [policy, idx] : by_policy) {
        std::vector<sweep::FrontierInput> sub;
        for (size_t i : idx) sub.push_back({metrics[i].tokens_per_s, metrics[i].accuracy});
        std::set<size_t> front;
        for (size_t k : sweep::pareto_front(sub)) front.insert(idx[k]);
        for (size_t i : idx) {
            const bool on_front = front.count(i) > 0;
            out["points"].push_back(point_json(points[i], metrics[i], on_front, swept.frontier[i]));
            if (on_front || all) print_row(points[i], metrics[i], swept.frontier[i]);
        }
    }
    std::printf(
        "  (* on the frontier over every policy; speedup, FLOP ratio and agreement are "
        "against `none` on the same items)\n");
    return out;
}

}  // namespace cl::cli

#include "sweep/point_metrics.h"

#include <map>
#include <utility>

#include "engine/base/stats.h"
#include "engine/trace/metrics.h"
#include "sweep/frontier.h"

namespace cl::sweep {
namespace {

using ItemId = std::pair<std::string, int32_t>;  // (family, index)

std::map<ItemId, const ItemResult*> by_item(const PointResult& p) {
    std::map<ItemId, const ItemResult*> m;
    for (const auto& it : p.items) m[{it.family, it.index}] = &it;
    return m;
}

// Speedup, FLOP ratio, agreement and the paired verdicts over the items both points ran.
void compare_with(PointMetrics& m, const PointResult& point, const PointResult& baseline) {
    const auto base = by_item(baseline);
    double wall = 0, base_wall = 0, flops = 0, base_flops = 0, agreement_sum = 0;
    int agreement_n = 0;
    for (const auto& it : point.items) {
        auto b = base.find({it.family, it.index});
        if (b == base.end()) continue;
        const ItemResult& bi = *b->second;
        wall += it.wall_ms;
        base_wall += bi.wall_ms;
        flops += it.flops;
        base_flops += bi.flops;
        m.fixed += it.correct && !bi.correct;
        m.broken += !it.correct && bi.correct;
        const double a = trace::final_agreement(it.final_tokens, bi.final_tokens, it.prompt_len);
        if (!std::isnan(a)) {
            agreement_sum += a;
            ++agreement_n;
        }
    }
    if (wall > 0 && base_wall > 0) m.speedup = base_wall / wall;
    if (flops > 0 && base_flops > 0) m.flop_ratio = base_flops / flops;
    if (!std::isnan(m.speedup) && !std::isnan(m.flop_ratio))
        m.efficiency = m.speedup / m.flop_ratio;
    if (agreement_n) m.agreement = agreement_sum / agreement_n;
    m.paired_p = stats::paired_exact_p(m.fixed, m.broken);
}

}  // namespace

const PointResult* baseline_of(const std::vector<PointResult>& points, const PointResult& p) {
    for (const auto& q : points)
        if (q.policy == "none" && q.params.empty() && q.model == p.model && q.device == p.device)
            return &q;
    return nullptr;
}

SweepMetrics sweep_metrics(const std::vector<PointResult>& points) {
    SweepMetrics out;
    std::vector<FrontierInput> xy;
    for (const auto& p : points) {
        out.metrics.push_back(point_metrics(p, baseline_of(points, p)));
        xy.push_back({out.metrics.back().tokens_per_s, out.metrics.back().accuracy});
    }
    out.frontier.assign(points.size(), false);
    for (size_t i : pareto_front(xy)) out.frontier[i] = true;
    return out;
}

PointMetrics point_metrics(const PointResult& point, const PointResult* baseline) {
    PointMetrics m;
    int64_t generated = 0;
    for (const auto& it : point.items) {
        m.correct += it.correct;
        generated += it.generated;
        m.wall_ms += it.wall_ms;
        m.flops += it.flops;
    }
    m.items = static_cast<int>(point.items.size());
    m.accuracy = m.items ? static_cast<double>(m.correct) / m.items : 0.0;
    std::tie(m.accuracy_lo, m.accuracy_hi) = stats::wilson_interval(m.correct, m.items);
    m.tokens_per_s = m.wall_ms > 0 ? static_cast<double>(generated) / (m.wall_ms / 1000) : 0.0;
    if (baseline) compare_with(m, point, *baseline);
    return m;
}

}  // namespace cl::sweep

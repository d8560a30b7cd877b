// The metrics of POLICIES.md section 4 over the steps a column has so far.
#include <cmath>

#include "viz/panels/panels.h"

namespace cl::viz {

namespace {
struct Totals {
    double wall = 0, flops = 0, full = 0, recompute = 0;
    int32_t n = 0;
};
Totals totals(const RunView& run, int32_t upto) {
    Totals t;
    for (const auto& s : run.steps) {
        if (upto >= 0 && s->step > upto) break;
        t.wall += s->wall_ms;
        t.flops += s->flops;
        t.full += s->flops_full;
        t.recompute += s->recompute_fraction();
        ++t.n;
    }
    return t;
}
}  // namespace

ColumnMetrics column_metrics(const RunView& run, const RunView* base, int32_t upto) {
    ColumnMetrics m;
    const Totals t = totals(run, upto);
    m.wall_ms = t.wall;
    m.flops = t.flops;
    m.flops_full = t.full;
    m.recompute = t.n ? t.recompute / t.n : 0;
    if (!run.steps.empty() && t.n > 0) {
        const auto& last = *run.steps[static_cast<size_t>(t.n - 1)];
        for (auto s : last.states)
            m.generated +=
                s == trace::TokenState::DecodedNow || s == trace::TokenState::DecodedEarlier;
    }
    m.tokens_per_s = t.wall > 0 ? m.generated / (t.wall / 1000.0) : 0;
    if (base && base != &run) {
        const Totals b = totals(*base, upto);
        // Compare over the same steps: the baseline's time for as many steps as this column has.
        if (b.n >= t.n && t.n > 0 && t.wall > 0) {
            double bw = 0, bf = 0;
            for (int32_t i = 0; i < t.n; ++i) {
                bw += base->steps[static_cast<size_t>(i)]->wall_ms;
                bf += base->steps[static_cast<size_t>(i)]->flops;
            }
            m.speedup = bw / t.wall;
            m.flop_ratio = t.flops > 0 ? bf / t.flops : NAN;
            m.efficiency = m.speedup / m.flop_ratio;
        }
        if (t.n > 0 && b.n > 0) {
            const auto& a = *run.steps[static_cast<size_t>(t.n - 1)];
            const auto& bb = *base->steps[static_cast<size_t>(std::min(t.n, b.n) - 1)];
            int same = 0, total = 0;
            for (size_t i = static_cast<size_t>(run.info.prompt_len);
                 i < std::min(a.tokens.size(), bb.tokens.size()); ++i) {
                if (a.states[i] == trace::TokenState::Masked ||
                    bb.states[i] == trace::TokenState::Masked)
                    continue;
                ++total;
                same += a.tokens[i] == bb.tokens[i];
            }
            m.agreement = total ? static_cast<double>(same) / total : NAN;
            // First divergence: first step committing a token the baseline has another token at.
            const auto& final_base = *base->steps.back();
            for (int32_t i = 0; i < t.n && m.first_divergence < 0; ++i)
                for (int32_t pos : run.steps[static_cast<size_t>(i)]->committed)
                    if (final_base.states[static_cast<size_t>(pos)] != trace::TokenState::Masked &&
                        run.steps[static_cast<size_t>(i)]->tokens[static_cast<size_t>(pos)] !=
                            final_base.tokens[static_cast<size_t>(pos)]) {
                        m.first_divergence = run.steps[static_cast<size_t>(i)]->step;
                        break;
                    }
        }
    } else if (base == &run) {
        m.speedup = m.flop_ratio = m.efficiency = m.agreement = 1.0;
    }
    return m;
}

}  // namespace cl::viz

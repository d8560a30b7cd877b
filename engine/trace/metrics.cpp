#include "engine/trace/metrics.h"

#include <algorithm>
#include <cmath>

namespace cl::trace {
namespace {

struct Totals {
    double wall = 0, flops = 0, full = 0, recompute = 0;
    int32_t n = 0;
    const StepRecord* last = nullptr;
};

Totals totals(const StepList& steps, int32_t upto) {
    Totals t;
    for (const auto& s : steps) {
        if (upto >= 0 && s->step > upto) break;
        t.wall += s->wall_ms;
        t.flops += s->flops;
        t.full += s->flops_full;
        t.recompute += s->recompute_fraction();
        ++t.n;
        t.last = s.get();
    }
    return t;
}

bool decoded(const StepRecord& s, size_t i) {
    return i < s.states.size() && s.states[i] != TokenState::Masked;
}

// The share of response positions that both sides have decoded and that hold the same token.
template <typename Decoded>
double agreement_over(const std::vector<int32_t>& run, const std::vector<int32_t>& base,
                      int32_t prompt_len, Decoded both_decoded) {
    int same = 0, total = 0;
    const size_t end = std::min(run.size(), base.size());
    for (size_t i = static_cast<size_t>(std::max(prompt_len, 0)); i < end; ++i) {
        if (!both_decoded(i)) continue;
        ++total;
        same += run[i] == base[i];
    }
    return total ? static_cast<double>(same) / total : NAN;
}

}  // namespace

int32_t generated_tokens(const StepRecord& last, int32_t prompt_len, int32_t eos_id) {
    int32_t n = 0;
    for (size_t i = static_cast<size_t>(std::max(prompt_len, 0)); i < last.tokens.size(); ++i) {
        if (!decoded(last, i)) continue;
        if (last.tokens[i] == eos_id) break;
        ++n;
    }
    return n;
}

double agreement(const StepRecord& run_last, const StepRecord& base_last, int32_t prompt_len) {
    return agreement_over(run_last.tokens, base_last.tokens, prompt_len,
                          [&](size_t i) { return decoded(run_last, i) && decoded(base_last, i); });
}

double final_agreement(const std::vector<int32_t>& run_final,
                       const std::vector<int32_t>& base_final, int32_t prompt_len) {
    return agreement_over(run_final, base_final, prompt_len, [](size_t) { return true; });
}

int32_t first_divergence(const StepList& run, const StepRecord& base_last, int32_t upto) {
    for (const auto& s : run) {
        if (upto >= 0 && s->step > upto) break;
        for (int32_t pos : s->committed) {
            const auto p = static_cast<size_t>(pos);
            if (decoded(base_last, p) && s->tokens[p] != base_last.tokens[p]) return s->step;
        }
    }
    return -1;
}

void extend_throughput_series(const RunSteps& run, std::vector<ThroughputSample>& series) {
    const StepList& steps = *run.steps;
    double elapsed_ms = series.empty() ? 0 : series.back().elapsed_s * 1000.0;
    for (size_t k = series.size(); k < steps.size(); ++k) {
        const StepRecord& s = *steps[k];
        elapsed_ms += s.wall_ms;
        const int32_t generated = generated_tokens(s, run.prompt_len, run.eos_id);
        series.push_back(
            {elapsed_ms / 1000.0, elapsed_ms > 0 ? generated / (elapsed_ms / 1000.0) : 0, s.step});
    }
}

double efficiency(double flops, double wall_ms, double base_flops, double base_wall_ms) {
    if (wall_ms <= 0 || flops <= 0 || base_wall_ms <= 0 || base_flops <= 0) return NAN;
    const double speedup = base_wall_ms / wall_ms, flop_ratio = base_flops / flops;
    return speedup / flop_ratio;
}

RunMetrics run_metrics(const RunSteps& run, const RunSteps* baseline, int32_t upto) {
    RunMetrics m;
    const Totals t = totals(*run.steps, upto);
    m.wall_ms = t.wall;
    m.flops = t.flops;
    m.flops_full = t.full;
    m.recompute = t.n ? t.recompute / t.n : 0;
    if (t.last) m.generated = generated_tokens(*t.last, run.prompt_len, run.eos_id);
    m.tokens_per_s = t.wall > 0 ? m.generated / (t.wall / 1000.0) : 0;
    if (!baseline) return m;
    if (baseline->steps == run.steps) {
        m.speedup = m.flop_ratio = m.efficiency = m.agreement = 1.0;
        return m;
    }
    const Totals b = totals(*baseline->steps, upto);
    if (t.n == 0 || b.n == 0) return m;
    m.speedup = t.wall > 0 ? b.wall / t.wall : NAN;
    m.flop_ratio = t.flops > 0 ? b.flops / t.flops : NAN;
    m.efficiency = efficiency(t.flops, t.wall, b.flops, b.wall);
    m.agreement = agreement(*t.last, *b.last, run.prompt_len);
    m.first_divergence = first_divergence(*run.steps, *b.last, upto);
    return m;
}

}  // namespace cl::trace

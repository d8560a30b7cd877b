#include "engine/trace/drift_analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace cl::trace {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// How many of `steps` count "up to step upto".
size_t step_count(const StepList& steps, int32_t upto) {
    return upto < 0 ? steps.size() : std::min(steps.size(), static_cast<size_t>(upto) + 1);
}

// Average ranks (ties share the mean rank), 1-based.
std::vector<double> ranks(const std::vector<double>& v) {
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
        const double mean_rank = (static_cast<double>(i + j) / 2.0) + 1.0;
        for (size_t k = i; k <= j; ++k) r[order[k]] = mean_rank;
        i = j + 1;
    }
    return r;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
    const auto n = static_cast<double>(x.size());
    const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
    const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : kNaN;
}

// The signed distance from `row` to the nearest of `changed` (sorted); the left one on a tie.
int32_t nearest_signed(int32_t row, const std::vector<int32_t>& changed) {
    auto it = std::lower_bound(changed.begin(), changed.end(), row);
    int32_t best = std::numeric_limits<int32_t>::max();
    if (it != changed.end()) best = row - *it;  // <= 0
    if (it != changed.begin()) {
        const int32_t left = row - *(it - 1);  // > 0
        if (best == std::numeric_limits<int32_t>::max() || left <= -best) best = left;
    }
    return best;
}

void add_step(DriftReport& out, const RunInfo& info, const StepRecord& step,
              std::vector<int32_t> changed) {
    std::sort(changed.begin(), changed.end());
    const int32_t L = step.seq_len, D = out.max_distance;
    for (int32_t l = 0; l < step.n_layers; ++l)
        for (int32_t i = 0; i < L; ++i) {
            const auto at =
                static_cast<size_t>(l) * static_cast<size_t>(L) + static_cast<size_t>(i);
            const auto& d = step.drift;
            if (std::isnan(d.k_cos[at]) || std::isnan(d.v_cos[at])) continue;
            const auto region = drift_region(i, info.prompt_len, info.block_len, step.block);
            out.by_region[static_cast<size_t>(region)].add(d.k_cos[at], d.k_rel_l2[at], d.v_cos[at],
                                                           d.v_rel_l2[at]);
            const int32_t dist = nearest_signed(i, changed);
            if (dist >= -D && dist <= D) {
                const int32_t bin = dist + D;
                out.by_distance[static_cast<size_t>(bin)].add(d.k_cos[at], d.k_rel_l2[at],
                                                              d.v_cos[at], d.v_rel_l2[at]);
            }
        }
    ++out.steps;
}

}  // namespace

const char* to_string(DriftRegion r) {
    switch (r) {
        case DriftRegion::Prompt:
            return "prompt";
        case DriftRegion::Finished:
            return "finished blocks";
        case DriftRegion::Active:
            return "active block";
        case DriftRegion::Future:
            return "future blocks";
    }
    return "?";
}

DriftRegion drift_region(int32_t row, int32_t prompt_len, int32_t block_len, int32_t block) {
    if (row < prompt_len) return DriftRegion::Prompt;
    const int32_t b = block_len > 0 ? (row - prompt_len) / block_len : 0;
    return b < block ? DriftRegion::Finished
                     : (b == block ? DriftRegion::Active : DriftRegion::Future);
}

void DriftMeans::add(float kc, float kr, float vc, float vr) {
    k_cos += 1.0 - kc;
    k_rel += kr;
    v_cos += 1.0 - vc;
    v_rel += vr;
    ++n;
}

DriftMeans DriftMeans::mean() const {
    DriftMeans m = *this;
    if (n == 0) return m;
    const auto dn = static_cast<double>(n);
    m.k_cos /= dn;
    m.k_rel /= dn;
    m.v_cos /= dn;
    m.v_rel /= dn;
    return m;
}

std::array<std::array<double, 4>, kDriftRegions> DriftReport::ratio_to_active() const {
    std::array<std::array<double, 4>, kDriftRegions> out{};
    const auto& a = by_region[static_cast<size_t>(DriftRegion::Active)];
    for (size_t r = 0; r < by_region.size(); ++r) {
        const auto& m = by_region[r];
        const bool ok = m.n > 0 && a.n > 0;
        out[r] = {ok && m.k_cos > 0 ? a.k_cos / m.k_cos : kNaN,
                  ok && m.k_rel > 0 ? a.k_rel / m.k_rel : kNaN,
                  ok && m.v_cos > 0 ? a.v_cos / m.v_cos : kNaN,
                  ok && m.v_rel > 0 ? a.v_rel / m.v_rel : kNaN};
    }
    return out;
}

DriftAccumulator::DriftAccumulator(int32_t max_distance) {
    m_sums.max_distance = max_distance;
    const int32_t bins = 2 * max_distance + 1;
    m_sums.by_distance.assign(static_cast<size_t>(bins), {});
}

void DriftAccumulator::add_run(const RunInfo& info, const StepList& steps, int32_t upto) {
    for (size_t s = 1; s < step_count(steps, upto); ++s) {
        const auto& step = *steps[s];
        const auto& before = *steps[s - 1];
        if (!step.has_drift || before.committed.empty()) continue;
        add_step(m_sums, info, step, before.committed);
    }
}

DriftReport DriftAccumulator::report() const {
    DriftReport r = m_sums;
    for (auto& m : r.by_region) m = m.mean();
    for (auto& m : r.by_distance) m = m.mean();
    return r;
}

std::vector<int32_t> last_change_steps(const RunInfo& info, const StepList& steps, int32_t upto) {
    std::vector<int32_t> last(static_cast<size_t>(info.gen_len), -1);
    for (size_t k = 0; k < step_count(steps, upto); ++k)
        for (int32_t c : steps[k]->committed)
            if (c >= info.prompt_len && c < info.seq_len())
                last[static_cast<size_t>(c - info.prompt_len)] = steps[k]->step;
    return last;
}

std::vector<int32_t> change_counts(const RunInfo& info, const StepList& steps, int32_t upto) {
    std::vector<int32_t> n(static_cast<size_t>(info.gen_len), 0);
    for (size_t k = 0; k < step_count(steps, upto); ++k)
        for (int32_t c : steps[k]->committed)
            if (c >= info.prompt_len && c < info.seq_len())
                ++n[static_cast<size_t>(c - info.prompt_len)];
    return n;
}

double left_to_right(const std::vector<int32_t>& last_change) {
    std::vector<double> pos, step;
    for (size_t i = 0; i < last_change.size(); ++i)
        if (last_change[i] >= 0) {
            pos.push_back(static_cast<double>(i));
            step.push_back(static_cast<double>(last_change[i]));
        }
    if (pos.size() < 2) return kNaN;
    return pearson(ranks(pos), ranks(step));
}

}  // namespace cl::trace

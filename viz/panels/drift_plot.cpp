// Panel 6: drift and triggers over steps. For each trigger kind with a value (Elastic's attention
// drift, dLLM-Cache's V similarity, d2Cache's rollout share) the per-step minimum is drawn with its
// threshold line and a marker where a refresh fired. In oracle mode: the true staleness,
// 1 - cos(reused K, fresh K) averaged over reused rows, per layer.
#include <algorithm>
#include <cmath>
#include <map>

#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/plot.h"
#include "viz/text_fit.h"

namespace cl::viz {

void draw_drift_plot(ColumnContext& c) {
    const auto n = static_cast<int32_t>(c.run.steps.size());
    if (n == 0) return;
    const auto& pal = palette(c.view.dark);
    plot::Plot p;
    const float h = ImGui::GetFontSize() * 6;
    if (c.view.oracle_view) {
        const int32_t N = c.run.steps.front()->n_layers;
        std::vector<std::vector<float>> per_layer(static_cast<size_t>(N),
                                                  std::vector<float>(static_cast<size_t>(n), NAN));
        std::vector<float> xs(static_cast<size_t>(n));
        float hi = 1e-6f;
        for (int32_t t = 0; t < n; ++t) {
            xs[static_cast<size_t>(t)] = static_cast<float>(t);
            const auto& s = *c.run.steps[static_cast<size_t>(t)];
            if (!s.has_oracle) continue;
            for (int32_t l = 0; l < N; ++l) {
                double sum = 0;
                int cnt = 0;
                for (int32_t i = 0; i < s.seq_len; ++i) {
                    const size_t k = static_cast<size_t>(l) * static_cast<size_t>(s.seq_len) +
                                     static_cast<size_t>(i);
                    if (s.actions[k] == trace::RowAction::Recomputed ||
                        !std::isfinite(s.oracle.k_cos[k]))
                        continue;
                    sum += 1.0 - s.oracle.k_cos[k];
                    ++cnt;
                }
                const float v = cnt ? static_cast<float>(sum / cnt) : 0.f;
                per_layer[static_cast<size_t>(l)][static_cast<size_t>(t)] = v;
                hi = std::max(hi, v);
            }
        }
        if (plot::begin_plot("oracle staleness: 1 - cos(reused K, fresh K) per layer", {c.width, h},
                             p)) {
            plot::setup_axes(p, 0, std::max(1, n - 1), 0, hi * 1.1);
            for (int32_t l = 0; l < N; ++l)
                plot::plot_line(p, xs.data(), per_layer[static_cast<size_t>(l)].data(), n,
                                colormap_color(Colormap::Viridis,
                                               N > 1 ? static_cast<float>(l) / (N - 1) : 0.5f));
            if (c.step >= 0) plot::plot_vline(p, c.step, pal.text_dim);
            plot::end_plot(p);
        }
        return;
    }
    struct Series {
        std::vector<float> xs, ys;
        double threshold = NAN;
        std::vector<std::pair<float, float>> fired;
    };
    std::map<std::string, Series> series;
    for (int32_t t = 0; t < n; ++t) {
        std::map<std::string, float> step_min;
        for (const auto& e : c.run.steps[static_cast<size_t>(t)]->triggers) {
            // Drift signals are the events tested against a threshold; scheduled refreshes are not.
            if (!std::isfinite(e.value) || !std::isfinite(e.threshold)) continue;
            auto& sr = series[e.kind];
            if (std::isfinite(e.threshold)) sr.threshold = e.threshold;
            auto it = step_min.find(e.kind);
            step_min[e.kind] = it == step_min.end()
                                   ? static_cast<float>(e.value)
                                   : std::min(it->second, static_cast<float>(e.value));
            if (e.fired) sr.fired.emplace_back(static_cast<float>(t), static_cast<float>(e.value));
        }
        for (auto& [k, sr] : series) {
            sr.xs.push_back(static_cast<float>(t));
            sr.ys.push_back(step_min.count(k) ? step_min[k] : NAN);
        }
    }
    if (series.empty()) {
        int fired = 0;
        for (const auto& s : c.run.steps)
            for (const auto& e : s->triggers) fired += e.fired;
        fitted_textf(true, "no drift signal for this policy; %d scheduled refreshes so far", fired);
        return;
    }
    for (auto& [kind, sr] : series) {
        if (!plot::begin_plot((kind + " (min per step)").c_str(), {c.width, h}, p)) continue;
        double lo = 1e300, hi = -1e300;
        for (float y : sr.ys)
            if (std::isfinite(y)) {
                lo = std::min(lo, static_cast<double>(y));
                hi = std::max(hi, static_cast<double>(y));
            }
        if (std::isfinite(sr.threshold)) {
            lo = std::min(lo, sr.threshold);
            hi = std::max(hi, sr.threshold);
        }
        if (!(hi > lo)) {
            lo -= 0.5;
            hi += 0.5;
        }
        plot::setup_axes(p, 0, std::max(1, n - 1), lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo));
        plot::plot_line(p, sr.xs.data(), sr.ys.data(), static_cast<int>(sr.xs.size()), pal.accent);
        plot::plot_hline(p, sr.threshold, pal.threshold, "threshold");
        for (const auto& [x, y] : sr.fired) plot::plot_marker(p, x, y, pal.trigger);
        if (c.step >= 0) plot::plot_vline(p, c.step, pal.text_dim);
        plot::end_plot(p);
    }
}

}  // namespace cl::viz

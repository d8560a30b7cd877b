// The throughput chart: every column's tokens/s as its run went (one sample per step, against
// the engine time spent so far; metrics.h's definition applied to every prefix), live and in
// replay alike, with the values under the mouse; below it, while a loop runs, each finished
// lap's tokens/s so the effect of every slider move is visible. Also the state legend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>

#include "engine/trace/metrics.h"
#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/plot.h"

namespace cl::viz {
namespace {

// Each run's series, extended as its steps arrive. Records are immutable, so a run's first record
// identifies its steps; a re-run (or another run under the same id, as in a replay) starts a new
// series. Held weakly: a freed record's address can come back for another run. The canvas draws
// on one thread.
struct Series {
    std::weak_ptr<const trace::StepRecord> first;
    std::vector<trace::ThroughputSample> samples;
};

const std::vector<trace::ThroughputSample>& series_of(const RunView& r) {
    static std::map<int32_t, Series> memo;
    if (memo.size() > 64)  // loop laps: forget the runs whose records are gone
        for (auto it = memo.begin(); it != memo.end();)
            it = it->second.first.expired() ? memo.erase(it) : std::next(it);
    Series& s = memo[r.info.run_id];
    const auto first = r.steps.empty() ? nullptr : r.steps.front();
    if (s.first.lock() != first || s.samples.size() > r.steps.size()) s = Series{first, {}};
    const trace::RunSteps steps{&r.steps, r.info.prompt_len, r.info.eos_id};
    trace::extend_throughput_series(steps, s.samples);
    return s.samples;
}

// The sample of `series` nearest to engine time `t` (seconds).
const trace::ThroughputSample* sample_at(const std::vector<trace::ThroughputSample>& series,
                                         double t) {
    if (series.empty()) return nullptr;
    auto it = std::lower_bound(
        series.begin(), series.end(), t,
        [](const trace::ThroughputSample& s, double v) { return s.elapsed_s < v; });
    if (it == series.end()) return &series.back();
    if (it != series.begin() && t - std::prev(it)->elapsed_s < it->elapsed_s - t) --it;
    return &*it;
}

void hover_tooltip(const plot::Plot& p, const std::vector<RunView>& runs,
                   const std::vector<const std::vector<trace::ThroughputSample>*>& series) {
    const double t = p.x_at(ImGui::GetIO().MousePos.x);
    ImGui::BeginTooltip();
    ImGui::Text("engine time %.3f s", t);
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32);
    ImGui::TextDisabled("%s", trace::kTokensPerSecondDefinition);
    ImGui::PopTextWrapPos();
    for (size_t k = 0; k < runs.size(); ++k) {
        const auto* s = sample_at(*series[k], t);
        if (!s) continue;
        ImGui::Text("%s: %.1f tok/s at step %d (%.3f s)", column_title(runs, runs[k]).c_str(),
                    s->tokens_per_s, s->step, s->elapsed_s);
    }
    ImGui::EndTooltip();
}

// While a loop runs: the tokens/s of each finished run, one point per lap.
void draw_lap_history(const std::vector<RunView>& runs, const ViewState& view) {
    size_t n = 0;
    float hi = 1.f;
    for (const auto& r : runs) {
        n = std::max(n, r.throughput.size());
        for (float v : r.throughput)
            if (std::isfinite(v)) hi = std::max(hi, v);
    }
    if (n < 2) return;
    plot::Plot p;
    if (!plot::begin_plot("tokens/s of each finished run (loop laps, oldest left)",
                          {-1, ImGui::GetFontSize() * 4}, p))
        return;
    plot::setup_axes(p, 0, static_cast<double>(n - 1), 0, hi * 1.15);
    for (size_t k = 0; k < runs.size(); ++k) {
        const auto& r = runs[k];
        std::vector<float> xs(r.throughput.size());
        for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(n - xs.size() + i);
        plot::plot_line(p, xs.data(), r.throughput.data(), static_cast<int>(xs.size()),
                        series_color(k, view.dark), 2.f);
    }
    plot::end_plot(p);
}

}  // namespace

void draw_throughput_chart(const std::vector<RunView>& runs, const ViewState& view) {
    std::vector<const std::vector<trace::ThroughputSample>*> series;
    double t_max = 0, hi = 1;
    for (const auto& r : runs) {
        series.push_back(&series_of(r));
        for (const auto& s : *series.back()) {
            t_max = std::max(t_max, s.elapsed_s);
            hi = std::max(hi, s.tokens_per_s);
        }
    }
    plot::Plot p;
    if (!plot::begin_plot("throughput: tokens/s so far against engine time (per step)",
                          {-1, ImGui::GetFontSize() * 6}, p))
        return;
    plot::setup_axes(p, 0, std::max(t_max, 1e-3), 0, hi * 1.15);
    const auto& pal = palette(view.dark);
    plot::x_ticks(p, pal.text_dim, "%.2f", "s");
    for (size_t k = 0; k < runs.size(); ++k) {
        std::vector<float> xs, ys;
        for (const auto& s : *series[k]) {
            xs.push_back(static_cast<float>(s.elapsed_s));
            ys.push_back(static_cast<float>(s.tokens_per_s));
        }
        const ImU32 color = series_color(k, view.dark);
        plot::plot_line(p, xs.data(), ys.data(), static_cast<int>(xs.size()), color, 2.f);
        if (!xs.empty()) plot::plot_marker(p, xs.back(), ys.back(), color, 3.f);
    }
    const bool hovered = p.hovered;
    plot::end_plot(p);
    if (hovered && !view.figure_mode) hover_tooltip(p, runs, series);
    for (size_t k = 0; k < runs.size(); ++k)
        plot::legend_item(column_title(runs, runs[k]).c_str(), series_color(k, view.dark));
    ImGui::NewLine();
    draw_lap_history(runs, view);
}

void draw_legend(const std::vector<RunView>& runs, const ViewState& view) {
    const auto uniform = [](const RunView& r) { return r.info.noise_process == "uniform"; };
    const bool any_uniform = std::any_of(runs.begin(), runs.end(), uniform);
    const bool all_uniform = !runs.empty() && std::all_of(runs.begin(), runs.end(), uniform);
    for (auto s : {trace::TokenState::Prompt, trace::TokenState::Masked,
                   trace::TokenState::DecodedEarlier, trace::TokenState::DecodedNow}) {
        std::string label = state_label(s, all_uniform);
        if (any_uniform && !all_uniform && s != trace::TokenState::Prompt)
            label += std::string(" / ") + state_label(s, true);
        plot::legend_item(label.c_str(), state_color(s, view.dark));
    }
    plot::legend_item("recomputed (outline)", palette(view.dark).recomputed);
    ImGui::NewLine();
}

}  // namespace cl::viz

// The live throughput chart: tokens/s per policy over time (one sample per finished run or per
// second of a live run), so the effect of every slider move is visible. Also the state legend.
#include <algorithm>
#include <cmath>

#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/plot.h"

namespace cl::viz {

void draw_throughput_chart(const std::vector<RunView>& runs, const ViewState& view) {
    plot::Plot p;
    if (!plot::begin_plot("throughput (tokens/s per policy)", {-1, ImGui::GetFontSize() * 5}, p))
        return;
    size_t n = 1;
    float hi = 1.f;
    for (const auto& r : runs) {
        n = std::max(n, r.throughput.size());
        for (float v : r.throughput)
            if (std::isfinite(v)) hi = std::max(hi, v);
    }
    plot::setup_axes(p, 0, static_cast<double>(std::max<size_t>(2, n) - 1), 0, hi * 1.15);
    for (size_t k = 0; k < runs.size(); ++k) {
        const auto& r = runs[k];
        std::vector<float> xs(r.throughput.size());
        for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i);
        const ImU32 col = colormap_color(
            Colormap::Viridis, runs.size() > 1 ? static_cast<float>(k) / (runs.size() - 1) : 0.5f);
        plot::plot_line(p, xs.data(), r.throughput.data(), static_cast<int>(xs.size()), col, 2.f);
    }
    plot::end_plot(p);
    for (size_t k = 0; k < runs.size(); ++k)
        plot::legend_item(
            column_title(runs, runs[k]).c_str(),
            colormap_color(Colormap::Viridis,
                           runs.size() > 1 ? static_cast<float>(k) / (runs.size() - 1) : 0.5f));
    ImGui::NewLine();
    (void)view;
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

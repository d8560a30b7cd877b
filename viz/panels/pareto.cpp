// Panel "pareto": every point of a sweep as accuracy against throughput, one colour per policy,
// Wilson 95% intervals as whiskers, the frontier over all points as a staircase. Hovering a
// point shows its parameters and metrics; clicking it returns its index (the app loads its
// parameters into the sliders and runs it beside `none`).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/plot.h"

namespace cl::viz {
namespace {

// Policies take the series colours in order of first appearance.
std::map<std::string, ImU32> policy_colors(const ParetoData& data, bool dark) {
    std::map<std::string, ImU32> colors;
    size_t next = 0;
    for (const auto& p : data.points)
        if (!colors.count(p.policy)) colors[p.policy] = series_color(next++, dark);
    return colors;
}

std::string params_text(const ParetoPoint& p) {
    std::string s;
    for (const auto& [k, v] : p.params) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s%s=%g", s.empty() ? "" : ", ", k.c_str(), v);
        s += buf;
    }
    return s.empty() ? "(no parameters)" : s;
}

void draw_frontier(plot::Plot& plot, const ParetoData& data, ImU32 color) {
    std::vector<const ParetoPoint*> front;
    for (const auto& p : data.points)
        if (p.frontier) front.push_back(&p);
    std::sort(front.begin(), front.end(),
              [](const auto* a, const auto* b) { return a->tokens_per_s < b->tokens_per_s; });
    for (size_t i = 1; i < front.size(); ++i) {  // a staircase: accuracy holds until the next point
        const ImVec2 a = plot.to_screen(front[i - 1]->tokens_per_s, front[i - 1]->accuracy);
        const ImVec2 corner = plot.to_screen(front[i - 1]->tokens_per_s, front[i]->accuracy);
        const ImVec2 b = plot.to_screen(front[i]->tokens_per_s, front[i]->accuracy);
        plot.dl->AddLine(a, corner, color, 1.5f);
        plot.dl->AddLine(corner, b, color, 1.5f);
    }
}

// Accuracy gridlines every 10 points, labelled inside the left edge, instead of the frame's end
// labels: the axis is zoomed to the points' intervals, so its ends are not round numbers.
void draw_y_grid(plot::Plot& plot, ImU32 line, ImU32 text) {
    for (int k = static_cast<int>(std::ceil(plot.y0 * 10 - 1e-9));
         k <= static_cast<int>(std::floor(plot.y1 * 10 + 1e-9)); ++k) {
        const ImVec2 a = plot.to_screen(plot.x0, k / 10.0), b = plot.to_screen(plot.x1, k / 10.0);
        plot.dl->AddLine(a, b, line, 1.f);
        char label[16];
        std::snprintf(label, sizeof label, "%d%%", k * 10);
        // Above its line, or below it at the top edge; none on the bottom edge (x tick labels).
        const float h = ImGui::GetFontSize();
        if (a.y > plot.max.y - 2) continue;
        plot.dl->AddText({a.x + 3, a.y - h < plot.min.y ? a.y + 1 : a.y - h}, text, label);
    }
}

// The accuracy range to show: every interval, rounded out to 10 points (0..1 at most).
std::pair<double, double> accuracy_range(const ParetoData& data) {
    double lo = 1, hi = 0;
    for (const auto& p : data.points) {
        lo = std::min(lo, p.accuracy_lo);
        hi = std::max(hi, p.accuracy_hi);
    }
    lo = std::max(0.0, std::floor(lo * 10) / 10);
    hi = std::min(1.0, std::ceil(hi * 10) / 10);
    return {lo, std::max(hi, lo + 0.1) + 0.02};  // room above the top row of markers
}

void tooltip(const ParetoPoint& p) {
    ImGui::BeginTooltip();
    ImGui::Text("%s  %s", p.policy.c_str(), params_text(p).c_str());
    ImGui::Text("accuracy %.1f%% [%.1f, %.1f]   %.1f tok/s   speedup %.2fx%s", 100 * p.accuracy,
                100 * p.accuracy_lo, 100 * p.accuracy_hi, p.tokens_per_s, p.speedup,
                p.frontier ? "   (on the frontier)" : "");
    ImGui::TextDisabled("click: run these settings beside none");
    ImGui::EndTooltip();
}

}  // namespace

int pareto_point_at(const plot::Plot& plot, const ParetoData& data, ImVec2 m) {
    int best = -1;
    float best_d = 36.f;  // 6 px
    for (size_t i = 0; i < data.points.size(); ++i) {
        const ImVec2 s = plot.to_screen(data.points[i].tokens_per_s, data.points[i].accuracy);
        const float d = (s.x - m.x) * (s.x - m.x) + (s.y - m.y) * (s.y - m.y);
        if (d < best_d) {
            best_d = d;
            best = static_cast<int>(i);
        }
    }
    return best;
}

int draw_pareto(const ParetoData& data, const ViewState& view) {
    if (data.points.empty()) {
        ImGui::TextDisabled("no sweep points (cachelens-cli sweep run SPEC --out FILE)");
        return -1;
    }
    const auto& pal = palette(view.dark);
    const auto colors = policy_colors(data, view.dark);
    double x1 = 0;
    for (const auto& p : data.points) x1 = std::max(x1, p.tokens_per_s);
    plot::Plot plot;
    const std::string title = "accuracy vs tokens/s: " + data.title;
    if (!plot::begin_plot(title.c_str(), {-1, ImGui::GetFontSize() * 16}, plot)) return -1;
    const auto [y0, y1] = accuracy_range(data);
    plot::setup_axes(plot, 0, x1 * 1.08 + 1e-9, y0, y1);
    plot.label_y_ends = false;  // the gridlines carry the percentages
    draw_y_grid(plot, pal.grid, pal.text_dim);
    plot::x_ticks(plot, pal.text_dim, "%.0f", "tok/s");
    draw_frontier(plot, data, pal.text_dim);
    for (const auto& p : data.points) {
        const ImU32 c = colors.at(p.policy);
        const ImVec2 lo = plot.to_screen(p.tokens_per_s, p.accuracy_lo);
        const ImVec2 hi = plot.to_screen(p.tokens_per_s, p.accuracy_hi);
        plot.dl->AddLine(lo, hi, (c & 0x00FFFFFF) | 0x80000000, 1.f);
        plot::plot_marker(plot, p.tokens_per_s, p.accuracy, c, p.frontier ? 4.5f : 3.f);
    }
    const int hovered = plot.hovered ? pareto_point_at(plot, data, ImGui::GetIO().MousePos) : -1;
    plot::end_plot(plot);
    for (const auto& [policy, c] : colors) plot::legend_item(policy.c_str(), c);
    ImGui::NewLine();
    ImGui::TextDisabled(
        "%zu points; x: tokens/s, y: exact match; whiskers: Wilson 95%%; line: "
        "the frontier over every policy",
        data.points.size());
    if (hovered < 0) return -1;
    tooltip(data.points[static_cast<size_t>(hovered)]);
    return ImGui::IsMouseClicked(ImGuiMouseButton_Left) ? hovered : -1;
}

}  // namespace cl::viz

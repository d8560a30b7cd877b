// Panel "accuracy vs steps": the blog's third claim, drawn from the accuracy sweeps a session
// stores (`cachelens-cli sweep-steps --record`). Exact match against the step count T on a log
// axis, one line per (model, task); masked models in the accent colour, uniform-noise models in
// the trigger colour, thick for the first task and thin for the others; whiskers are the Wilson
// 95% intervals, so a reader sees how few items a gap rests on.
#include <algorithm>
#include <cmath>
#include <string>

#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/plot.h"

namespace cl::viz {
namespace {

struct Series {
    std::string model, task, noise;
    std::vector<const trace::AccuracyPoint*> points;  // sorted by steps
};

std::vector<Series> series_of(const trace::AccuracySweep& sweep) {
    std::vector<Series> out;
    for (const auto& [model, task] : sweep.series()) {
        Series s{model, task, "", {}};
        for (const auto& p : sweep.points)
            if (p.model == model && p.task == task) {
                s.points.push_back(&p);
                s.noise = p.noise_process;
            }
        std::sort(s.points.begin(), s.points.end(),
                  [](const auto* a, const auto* b) { return a->steps < b->steps; });
        out.push_back(std::move(s));
    }
    return out;
}

void draw_step_ticks(plot::Plot& p, const trace::AccuracySweep& sweep, ImU32 color) {
    std::vector<int32_t> seen;
    for (const auto& pt : sweep.points) {
        if (std::find(seen.begin(), seen.end(), pt.steps) != seen.end()) continue;
        seen.push_back(pt.steps);
        const ImVec2 s = p.to_screen(std::log2(pt.steps), p.y0);
        const std::string label = "T=" + std::to_string(pt.steps);
        p.dl->AddText({s.x - ImGui::CalcTextSize(label.c_str()).x / 2, s.y - ImGui::GetFontSize()},
                      color, label.c_str());
    }
}

void draw_series(plot::Plot& p, const Series& s, ImU32 color, float thickness, float offset) {
    std::vector<float> xs, ys;
    for (const auto* pt : s.points) {
        const double x = std::log2(pt->steps);
        xs.push_back(static_cast<float>(x));
        ys.push_back(static_cast<float>(pt->accuracy()));
        const ImVec2 lo = p.to_screen(x, pt->low), hi = p.to_screen(x, pt->high);
        p.dl->AddLine({lo.x + offset, lo.y}, {hi.x + offset, hi.y}, color, 1.f);
        plot::plot_marker(p, x, pt->accuracy(), color, thickness + 1.5f);
    }
    plot::plot_line(p, xs.data(), ys.data(), static_cast<int>(xs.size()), color, thickness);
}

void draw_sweep(const trace::AccuracySweep& sweep, const ViewState& view, int index) {
    const auto& pal = palette(view.dark);
    const auto all = series_of(sweep);
    double x0 = 1e9, x1 = -1e9;
    for (const auto& pt : sweep.points) {
        x0 = std::min(x0, std::log2(pt.steps));
        x1 = std::max(x1, std::log2(pt.steps));
    }
    const std::string title = "exact match vs denoising steps (G=" + std::to_string(sweep.gen_len) +
                              ", B=" + std::to_string(sweep.block_len) + ", " + sweep.policy + ")";
    ImGui::PushID(index);  // several sweeps: one plot (and button id) each
    plot::Plot p;
    const bool visible = plot::begin_plot(title.c_str(), {-1, ImGui::GetFontSize() * 9}, p);
    ImGui::PopID();
    if (!visible) return;
    plot::setup_axes(p, x0 - 0.3, x1 + 0.3, 0, 1.05);
    draw_step_ticks(p, sweep, pal.text_dim);
    const std::string first_task = all.empty() ? "" : all.front().task;
    for (size_t k = 0; k < all.size(); ++k) {
        const ImU32 color = all[k].noise == "uniform" ? pal.trigger : pal.accent;
        const float offset = (static_cast<float>(k) - static_cast<float>(all.size()) / 2) * 2.f;
        draw_series(p, all[k], color, all[k].task == first_task ? 2.5f : 1.f, offset);
    }
    plot::end_plot(p);
    for (const auto& s : all) {
        const std::string label = s.model + " (" + s.noise + ") " + s.task;
        plot::legend_item(label.c_str(), s.noise == "uniform" ? pal.trigger : pal.accent);
    }
    ImGui::NewLine();  // legend items leave the cursor on their line
    const int items = sweep.points.empty() ? 0 : sweep.points.front().items;
    ImGui::TextDisabled("%d items per point (eval split, task seed %llu); whiskers: Wilson 95%%",
                        items, static_cast<unsigned long long>(sweep.task_seed));
}

}  // namespace

void draw_accuracy_vs_steps(const std::vector<trace::AccuracySweep>& sweeps,
                            const ViewState& view) {
    if (sweeps.empty()) {
        ImGui::TextDisabled(
            "no accuracy sweep in this session (cachelens-cli sweep-steps --record FILE adds one)");
        return;
    }
    for (size_t i = 0; i < sweeps.size(); ++i) draw_sweep(sweeps[i], view, static_cast<int>(i));
}

}  // namespace cl::viz

// The canvas: one column per run, step-aligned (or by normalised progress), each with the panels
// of UX.md in order, and the throughput chart and legend below.
#include <algorithm>
#include <cmath>

#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/text_fit.h"

namespace cl::viz {

const std::vector<std::string>& panel_names() {
    static const std::vector<std::string> names{
        "header",   "tokens",       "timeline", "recompute", "attention",         "drift",
        "kv-drift", "decode-order", "diff",     "inspector", "accuracy-vs-steps", "pareto"};
    return names;
}

int32_t column_step(const RunView& run, const ViewState& view, int32_t max_steps) {
    const auto n = static_cast<int32_t>(run.steps.size());
    if (n == 0) return -1;
    if (view.step < 0) return n - 1;
    if (view.align_by_progress && max_steps > 1)
        return std::clamp(static_cast<int32_t>(std::lround(static_cast<double>(view.step) /
                                                           (max_steps - 1) * (n - 1))),
                          0, n - 1);
    return std::clamp(view.step, 0, n - 1);
}

namespace {

// Grows the exported figure's rectangle by [a, b] (screen coordinates).
void extend_figure(ViewState& view, ImVec2 a, ImVec2 b) {
    if (!view.figure_mode || view.figure_panel.empty()) return;
    ImVec4& e = view.figure_extent;
    if (e.z <= e.x) {
        e = {a.x, a.y, b.x, b.y};
        return;
    }
    e = {std::min(e.x, a.x), std::min(e.y, a.y), std::max(e.z, b.x), std::max(e.w, b.y)};
}

// Draws `body` and, when the lesson highlights `name`, a thick frame around what it drew.
template <typename F>
void panel(const char* name, ViewState& view, F&& body) {
    if (view.figure_mode && !view.figure_panel.empty() && view.figure_panel != name) return;
    const bool lit = view.highlight.count(name) > 0;
    if (lit && view.scroll_to_highlight) ImGui::SetScrollHereY(0.05f);
    const ImVec2 start = ImGui::GetCursorScreenPos();
    body();
    const ImVec2 end{start.x + ImGui::GetContentRegionAvail().x, ImGui::GetCursorScreenPos().y};
    extend_figure(view, start, end);
    if (!lit) return;
    ImGui::GetWindowDrawList()->AddRect({start.x - 2, start.y - 2}, {end.x + 2, end.y},
                                        palette(view.dark).trigger, 3.f, 0, 3.f);
}

// The session's accuracy sweeps, below the columns (or alone when exported as a figure).
void draw_reports(const CanvasOptions& options, ViewState& view) {
    if (options.pareto) {
        panel("pareto", view, [&] {
            if (view.figure_mode)  // a figure has a title, not a collapsible header
                ImGui::TextUnformatted("Pareto: accuracy vs throughput (sweep)");
            else if (!ImGui::CollapsingHeader("Pareto: accuracy vs throughput (sweep)",
                                              ImGuiTreeNodeFlags_DefaultOpen))
                return;
            const int clicked = draw_pareto(*options.pareto, view);
            if (options.pareto_clicked && clicked >= 0) *options.pareto_clicked = clicked;
        });
    }
    if (!options.sweeps || options.sweeps->empty()) return;
    panel("accuracy-vs-steps", view, [&] {
        if (ImGui::CollapsingHeader("accuracy vs steps (stored sweep)",
                                    ImGuiTreeNodeFlags_DefaultOpen))
            draw_accuracy_vs_steps(*options.sweeps, view);
    });
}

}  // namespace

namespace {
// Two folders may hold the same weights (a copy with another config): both name and hash count.
bool same_model(const RunView& a, const RunView& b) {
    return a.info.model_hash == b.info.model_hash && a.info.model_name == b.info.model_name;
}
}  // namespace

const RunView* baseline_of(const std::vector<RunView>& runs, const RunView& run) {
    for (const auto& r : runs)
        if (r.info.policy == "none" && same_model(r, run)) return &r;
    return nullptr;
}

namespace {
// The parameters of `run` whose value another column of the same policy does not share.
std::string differing_params(const std::vector<RunView>& runs, const RunView& run) {
    std::string out;
    for (const auto& [key, value] : run.info.policy_params) {
        bool differs = false;
        for (const auto& r : runs) {
            if (&r == &run || r.info.policy != run.info.policy) continue;
            const auto it = r.info.policy_params.find(key);
            differs |= it == r.info.policy_params.end() || it->second != value;
        }
        if (differs) out += (out.empty() ? "" : ", ") + key + "=" + value;
    }
    return out;
}
}  // namespace

std::string column_title(const std::vector<RunView>& runs, const RunView& run) {
    std::string title = run.info.policy;
    for (const auto& r : runs)
        if (!same_model(r, run)) {
            title += " @" + run.info.model_name + " (" + run.info.architecture + ")";
            break;
        }
    // Two columns of one policy are told apart by what differs ("dkv-decode (delay=0)").
    const std::string differs = differing_params(runs, run);
    if (!differs.empty()) title += " (" + differs + ")";
    return title;
}

void draw_canvas(std::vector<RunView>& runs, ViewState& view, TextureProvider& textures,
                 const CanvasOptions& options) {
    if (!view.lesson_banner.empty()) {
        ImGui::PushStyleColor(ImGuiCol_ChildBg,
                              ImGui::ColorConvertU32ToFloat4(palette(view.dark).grid));
        // As tall as its text (wrapped), up to a third of the canvas; longer text scrolls.
        const float wrap = ImGui::GetContentRegionAvail().x - ImGui::GetStyle().WindowPadding.x * 2;
        const float text_h =
            ImGui::CalcTextSize(view.lesson_banner.c_str(), nullptr, false, wrap).y;
        const float banner_h = std::min(text_h + ImGui::GetStyle().WindowPadding.y * 2 + 2,
                                        ImGui::GetContentRegionAvail().y / 3);
        ImGui::BeginChild("##lesson", {0, banner_h}, true);
        ImGui::PushTextWrapPos(0.f);
        ImGui::TextUnformatted(view.lesson_banner.c_str());
        ImGui::PopTextWrapPos();
        ImGui::EndChild();
        ImGui::PopStyleColor();
    }
    const int32_t hovered_last_frame = view.hovered_pos;
    view.hovered_pos = -1;
    int32_t max_steps = 0;
    for (const auto& r : runs)
        max_steps = std::max(max_steps, static_cast<int32_t>(r.steps.size()));
    view.steps_available = max_steps;
    view.figure_extent = {0, 0, 0, 0};
    const bool report_figure = view.figure_mode && (view.figure_panel == "accuracy-vs-steps" ||
                                                    view.figure_panel == "pareto");
    if (runs.empty() || report_figure) {
        if (runs.empty())
            ImGui::TextDisabled("No runs. Pick policies and press Play, or open a session.");
        draw_reports(options, view);
        return;
    }
    if (view.figure_panel.empty() || !view.figure_mode) draw_legend(runs, view);
    const float avail = ImGui::GetContentRegionAvail().x;
    // A figure may show some columns only (baselines still come from all of them).
    std::vector<int> shown;
    for (int k = 0; k < static_cast<int>(runs.size()); ++k)
        if (!view.figure_mode || view.figure_columns.empty() || view.figure_columns.count(k))
            shown.push_back(k);
    if (shown.empty()) shown.push_back(0);
    const int cols = static_cast<int>(shown.size());
    // Columns share the width; below the minimum they scroll horizontally instead of shrinking.
    const float col_w =
        std::max(options.column_min_width, avail / cols - ImGui::GetStyle().ItemSpacing.x);
    const bool inspecting = view.pinned_pos >= 0;
    const bool has_reports = options.sweeps && !options.sweeps->empty();
    const float reserve = ImGui::GetFontSize() * ((inspecting ? 24 : 8) + (has_reports ? 13 : 0) +
                                                  (options.pareto ? 20 : 0));
    const float height =
        std::max(ImGui::GetFontSize() * 10, ImGui::GetContentRegionAvail().y - reserve);
    const bool any_uniform = std::any_of(runs.begin(), runs.end(), [](const RunView& r) {
        return r.info.noise_process == "uniform";
    });
    ImGui::BeginChild("##columns", {0, height}, false, ImGuiWindowFlags_HorizontalScrollbar);
    for (int k : shown) {
        auto& run = runs[static_cast<size_t>(k)];
        if (k != shown.front()) ImGui::SameLine();
        ImGui::PushID(k);
        // The column's name and metrics stay put; its panels scroll below them (a lesson that
        // scrolls to a framed panel kept no column title on screen).
        ImGui::BeginChild("##column", {col_w, 0}, true, ImGuiWindowFlags_NoScrollbar);
        const float inner = ImGui::GetContentRegionAvail().x;
        ColumnContext c{
            run,   baseline_of(runs, run), view, textures, column_step(run, view, max_steps),
            inner, column_title(runs, run)};
        if (view.figure_mode && !view.figure_panel.empty()) {
            const ImVec2 at = ImGui::GetCursorScreenPos();
            fitted_text(c.title);
            extend_figure(view, at, {at.x + inner, ImGui::GetCursorScreenPos().y});
        }
        panel("header", view, [&] { draw_header_metrics(c); });
        if (!view.figure_mode || view.figure_panel.empty()) ImGui::Separator();
        ImGui::BeginChild("##panels", {0, 0}, false,
                          view.figure_mode ? ImGuiWindowFlags_NoScrollbar : 0);  // no UI chrome
        c.width = ImGui::GetContentRegionAvail().x;
        panel("tokens", view, [&] { draw_token_strip(c); });
        panel("timeline", view, [&] { draw_timeline(c); });
        panel("recompute", view, [&] { draw_recompute_map(c); });
        panel("attention", view, [&] {
            if (ImGui::CollapsingHeader("attention", ImGuiTreeNodeFlags_DefaultOpen))
                draw_attention_map(c);
        });
        panel("drift", view, [&] {
            if (ImGui::CollapsingHeader(
                    view.oracle_view ? "staleness (oracle)" : "drift & triggers",
                    ImGuiTreeNodeFlags_DefaultOpen))
                draw_drift_plot(c);
        });
        panel("kv-drift", view, [&] {
            // Open when a uniform-noise run is on screen (its lesson is exactly this, and its
            // masked neighbours are the comparison); folded otherwise.
            if (ImGui::CollapsingHeader("K/V drift by region and distance",
                                        any_uniform ? ImGuiTreeNodeFlags_DefaultOpen : 0))
                draw_kv_drift(c);
        });
        panel("decode-order", view, [&] {
            if (ImGui::CollapsingHeader("decode order (step of last change)",
                                        any_uniform ? ImGuiTreeNodeFlags_DefaultOpen : 0))
                draw_decode_order(c);
        });
        panel("diff", view, [&] { draw_diff_strip(c); });
        ImGui::EndChild();  // ##panels
        ImGui::EndChild();  // ##column
        ImGui::PopID();
    }
    ImGui::EndChild();
    view.scroll_to_highlight = false;
    if (inspecting) {
        ImGui::BeginChild("##inspector", {0, ImGui::GetFontSize() * 16}, true);
        panel("inspector", view, [&] { draw_inspector(runs, view); });
        ImGui::EndChild();
    } else if (hovered_last_frame >= 0 && !view.figure_mode) {
        fitted_textf(true, "position %d - click a token to pin it in the inspector",
                     hovered_last_frame);
    }
    draw_reports(options, view);
    if (!view.figure_mode || view.figure_panel.empty()) draw_throughput_chart(runs, view);
}

}  // namespace cl::viz

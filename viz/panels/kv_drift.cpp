// Panel "kv drift": the noise-agnostic caching claims on this column's run, up to the current step
// (engine/trace/drift_analysis.h, the numbers `cachelens-cli drift` prints): how much less each
// region's K/V drift than the active block's, and drift against the signed distance from the
// tokens changed at the step before (the decode order has its own panel, decode_order.cpp). Shown
// when the run carries the drift probe (live columns ask for it unless Run setup turns it off).
#include <algorithm>
#include <cmath>

#include "engine/trace/drift_analysis.h"
#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/panels/step_memo.h"
#include "viz/plot.h"
#include "viz/text_fit.h"

namespace cl::viz {
namespace {

constexpr int32_t kMaxDistance = 8;

void draw_region_table(const trace::DriftReport& r) {
    const auto ratio = r.ratio_to_active();
    if (!ImGui::BeginTable("##regions", 4, ImGuiTableFlags_SizingStretchProp)) return;
    // Short headers (a column is ~300 px at 1280x720); hovering one says what it is.
    static const char* const kHeaders[4][2] = {
        {"region", "prompt, finished blocks, the active block, future blocks"},
        {"1-cos K", "mean 1 - cos(K this step, K last step) over the region's computed rows"},
        {"K ratio", "active block / region under 1 - cos K: how many times less it drifts"},
        {"V ratio", "active block / region under the relative L2 change of V"}};
    for (const auto& h : kHeaders) ImGui::TableSetupColumn(h[0]);
    ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
    for (int k = 0; k < 4; ++k) {
        ImGui::TableSetColumnIndex(k);
        ImGui::TableHeader(kHeaders[k][0]);
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kHeaders[k][1]);
    }
    for (int g = 0; g < trace::kDriftRegions; ++g) {
        const auto& m = r.by_region[static_cast<size_t>(g)];
        const auto& q = ratio[static_cast<size_t>(g)];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(trace::to_string(static_cast<trace::DriftRegion>(g)));
        ImGui::TableNextColumn();
        if (m.n > 0)
            ImGui::Text("%.2e", m.k_cos);
        else
            ImGui::TextDisabled("-");
        for (double v : {q[0], q[3]}) {
            ImGui::TableNextColumn();
            if (std::isfinite(v))
                ImGui::Text("%.1fx", v);
            else
                ImGui::TextDisabled("-");
        }
    }
    ImGui::EndTable();
}

// Both metrics on one axis, each divided by its value at distance 0 (the changed token itself).
void draw_distance_profile(const ColumnContext& c, const trace::DriftReport& r) {
    const auto& pal = palette(c.view.dark);
    const int n = 2 * kMaxDistance + 1;
    std::vector<float> xs(static_cast<size_t>(n)), k(static_cast<size_t>(n), NAN),
        v(static_cast<size_t>(n), NAN);
    const auto& at0 = r.at_distance(0);
    for (int d = -kMaxDistance; d <= kMaxDistance; ++d) {
        const int bin = d + kMaxDistance;
        const auto i = static_cast<size_t>(bin);
        xs[i] = static_cast<float>(d);
        const auto& m = r.at_distance(d);
        if (m.n == 0) continue;
        if (at0.k_cos > 0) k[i] = static_cast<float>(m.k_cos / at0.k_cos);
        if (at0.v_rel > 0) v[i] = static_cast<float>(m.v_rel / at0.v_rel);
    }
    plot::Plot p;
    if (!plot::begin_plot("drift vs distance from a changed token (share of its own)",
                          {c.width, ImGui::GetFontSize() * 6}, p))
        return;
    plot::setup_axes(p, -kMaxDistance, kMaxDistance, 0, 1.05);
    plot::plot_line(p, xs.data(), k.data(), n, pal.accent);
    plot::plot_line(p, xs.data(), v.data(), n, pal.trigger);
    plot::plot_vline(p, 0, pal.text_dim);
    plot::end_plot(p);
    plot::legend_item("1-cos K", pal.accent);
    plot::legend_item("rel. L2 V", pal.trigger);
    ImGui::NewLine();  // legend items leave the cursor on their line
}

// The run's drift report up to the cursor, once per (run, step record).
const trace::DriftReport& drift_report(const ColumnContext& c) {
    static StepMemo<trace::DriftReport> memo;
    return memo.get(c, [&] {
        trace::DriftAccumulator acc(kMaxDistance);
        acc.add_run(c.run.info, c.run.steps, c.step);
        return acc.report();
    });
}

}  // namespace

void draw_kv_drift(ColumnContext& c) {
    if (c.step < 0 || c.run.steps.empty()) return;
    const auto& steps = c.run.steps;
    const auto upto = static_cast<size_t>(c.step) + 1;
    if (std::none_of(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(upto),
                     [](const auto& s) { return s->has_drift; })) {
        fitted_textf(
            true,
            "no drift probe in this run (Run setup: K/V drift probe; generate/compare --drift)");
        return;
    }
    const trace::DriftReport& report = drift_report(c);
    fitted_textf(false, "%s noise, steps 0-%d", c.run.info.noise_process.c_str(), c.step);
    draw_region_table(report);
    draw_distance_profile(c, report);
}

}  // namespace cl::viz

// One function per panel (one panel per file). Each draws into the current ImGui window.
#pragma once

#include "engine/trace/metrics.h"

#include <cmath>

#include "viz/plot.h"
#include "viz/viz_context.h"

namespace cl::viz {

struct ColumnContext {
    RunView& run;
    const RunView* baseline;  // the same model's `none` column when present (speedup, diff)
    ViewState& view;
    TextureProvider& textures;
    int32_t step;  // the step this column shows (-1: no step yet)
    float width;
    std::string title = {};  // column_title(); the policy when empty
};

// The baseline of a column: the first `none` run of the same model (a comparison may hold runs of
// a masked and a uniform-noise model side by side); nullptr when there is none.
const RunView* baseline_of(const std::vector<RunView>& runs, const RunView& run);
// The policy, plus " @model" when the runs come from more than one model.
std::string column_title(const std::vector<RunView>& runs, const RunView& run);

void draw_header_metrics(ColumnContext& c);
void draw_token_strip(ColumnContext& c);
void draw_timeline(ColumnContext& c);
void draw_recompute_map(ColumnContext& c);
void draw_attention_map(ColumnContext& c);
void draw_drift_plot(ColumnContext& c);
void draw_kv_drift(ColumnContext& c);
void draw_decode_order(ColumnContext& c);

// Every panel's name, in drawing order: what a lesson may highlight and the app may export.
const std::vector<std::string>& panel_names();
void draw_diff_strip(ColumnContext& c);
void draw_accuracy_vs_steps(const std::vector<trace::AccuracySweep>& sweeps, const ViewState& view);
// The Pareto view of a sweep; returns the index of a clicked point, or -1.
int draw_pareto(const ParetoData& data, const ViewState& view);
// The point of `data` within 6 px of screen position `mouse` in `plot` (the nearest), or -1.
int pareto_point_at(const plot::Plot& plot, const ParetoData& data, ImVec2 mouse);
void draw_throughput_chart(const std::vector<RunView>& runs, const ViewState& view);
void draw_legend(const std::vector<RunView>& runs, const ViewState& view);
// A token state's name; under uniform noise masked reads "noisy", decoded-now "changed now" and
// decoded-earlier "final" (its block has ended).
const char* state_label(trace::TokenState state, bool uniform);
void draw_inspector(std::vector<RunView>& runs, ViewState& view);

// Shared metrics, defined once (POLICIES.md section 4) and shown with their formulas.
// The metrics of a column up to the step on screen (engine/trace/metrics.h defines them).
// A position axis drawn across a panel's width: positions [first, first + count) of the panel's
// own [axis_first, axis_first + axis_count), the view's zoom window clipped to it; u0..u1 is the
// part of a texture over the whole axis that shows them.
struct PositionAxis {
    int32_t first = 0, count = 1;
    float u0 = 0.f, u1 = 1.f;
    bool zoomed = false;
    // The position under `fraction` (0..1) of the panel's width.
    int32_t at(float fraction) const;
    // Where position p (may be fractional, e.g. p + 0.5) falls, as a fraction of the width.
    float fraction_of(float p) const { return (p - static_cast<float>(first)) / count; }
};
PositionAxis position_axis(const ViewState& view, int32_t axis_first, int32_t axis_count);
// Ctrl+wheel over the hovered panel zooms the view around the position under the cursor (the
// wheel alone still scrolls the column), a double click shows every position; returns a caption
// for the panel ("positions 512-639 of 0-1279") or "" when not zoomed.
std::string handle_position_zoom(ViewState& view, const PositionAxis& axis, int32_t axis_first,
                                 int32_t axis_count, float cursor_fraction);

using ColumnMetrics = trace::RunMetrics;
ColumnMetrics column_metrics(const RunView& run, const RunView* baseline, int32_t upto_step);

}  // namespace cl::viz

// One function per panel (one panel per file). Each draws into the current ImGui window.
#pragma once

#include <cmath>

#include "viz/viz_context.h"

namespace cl::viz {

struct ColumnContext {
    RunView& run;
    const RunView* baseline;  // the `none` column when present (speedup, agreement, diff)
    ViewState& view;
    TextureProvider& textures;
    int32_t step;  // the step this column shows (-1: no step yet)
    float width;
};

void draw_header_metrics(ColumnContext& c);
void draw_token_strip(ColumnContext& c);
void draw_timeline(ColumnContext& c);
void draw_recompute_map(ColumnContext& c);
void draw_attention_map(ColumnContext& c);
void draw_drift_plot(ColumnContext& c);
void draw_diff_strip(ColumnContext& c);
void draw_throughput_chart(const std::vector<RunView>& runs, const ViewState& view);
void draw_legend(const ViewState& view);
void draw_inspector(std::vector<RunView>& runs, ViewState& view);

// Shared metrics, defined once (POLICIES.md section 4) and shown with their formulas.
struct ColumnMetrics {
    double tokens_per_s = 0, wall_ms = 0, flops = 0, flops_full = 0, recompute = 0;
    double speedup = NAN, flop_ratio = NAN, efficiency = NAN, agreement = NAN;
    int32_t first_divergence = -1;
    int32_t generated = 0;
};
ColumnMetrics column_metrics(const RunView& run, const RunView* baseline, int32_t upto_step);

}  // namespace cl::viz

// Panel "decode order": the blog's first claim on this column's run, up to the current step. Each
// response position is a point at (position, step of its last change); a left-to-right decode is
// a rising staircase, one point per block of steps. Under uniform noise a position may change
// several times: points of positions that changed more than once are drawn in the trigger colour
// (the tooltip gives the count). Spearman's rank correlation is the number `cachelens-cli drift`
// prints. Side by side, a masked and a uniform column show whether both decode left to right.
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

struct DecodeOrder {
    std::vector<int32_t> last_change;  // (G) step of each position's last change, -1 = none yet
    std::vector<int32_t> changes;      // (G) how many times each position changed
    int32_t revised = 0;               // positions that changed more than once
    double spearman = NAN;
};

// The decode order up to the cursor, once per (run, step record).
const DecodeOrder& decode_order(const ColumnContext& c) {
    static StepMemo<DecodeOrder> memo;
    return memo.get(c, [&] {
        DecodeOrder d;
        d.last_change = trace::last_change_steps(c.run.info, c.run.steps, c.step);
        d.changes = trace::change_counts(c.run.info, c.run.steps, c.step);
        d.revised = static_cast<int32_t>(
            std::count_if(d.changes.begin(), d.changes.end(), [](int32_t n) { return n > 1; }));
        d.spearman = trace::left_to_right(d.last_change);
        return d;
    });
}

void draw_block_edges(plot::Plot& p, const trace::RunInfo& info, ImU32 color) {
    if (info.block_len <= 0) return;
    for (int32_t b = info.block_len; b < info.gen_len; b += info.block_len)
        plot::plot_vline(p, b - 0.5, color);
}

// The position under the mouse, when it has a point: its numbers in a tooltip.
void hover_tooltip(const plot::Plot& p, const DecodeOrder& d) {
    if (!p.hovered) return;
    const auto pos = static_cast<int64_t>(std::lround(p.x_at(ImGui::GetIO().MousePos.x)));
    if (pos < 0 || pos >= static_cast<int64_t>(d.last_change.size())) return;
    const auto i = static_cast<size_t>(pos);
    if (d.last_change[i] < 0)
        ImGui::SetTooltip("response position %lld: not changed yet", static_cast<long long>(pos));
    else
        ImGui::SetTooltip("response position %lld: last changed at step %d, changed %d time(s)",
                          static_cast<long long>(pos), d.last_change[i], d.changes[i]);
}

}  // namespace

void draw_decode_order(ColumnContext& c) {
    if (c.step < 0 || c.run.steps.empty() || c.run.info.gen_len <= 0) return;
    const auto& pal = palette(c.view.dark);
    const DecodeOrder& d = decode_order(c);
    plot::Plot p;
    if (!plot::begin_plot("step of last change by response position",
                          {c.width, ImGui::GetFontSize() * 7}, p))
        return;
    const auto last_step = static_cast<double>(std::max(c.run.info.steps, c.step + 1));
    plot::setup_axes(p, -0.5, c.run.info.gen_len - 0.5, -0.5, last_step - 0.5);
    draw_block_edges(p, c.run.info, pal.grid);
    const float radius =
        std::clamp(c.width / static_cast<float>(c.run.info.gen_len) * 0.4f, 1.f, 3.f);
    for (size_t i = 0; i < d.last_change.size(); ++i)
        if (d.last_change[i] >= 0)
            plot::plot_marker(p, static_cast<double>(i), d.last_change[i],
                              d.changes[i] > 1 ? pal.trigger : pal.accent, radius);
    plot::end_plot(p);
    hover_tooltip(p, d);
    plot::legend_item("changed once", pal.accent);
    plot::legend_item("changed more than once", pal.trigger);
    ImGui::NewLine();  // legend items leave the cursor on their line
    if (std::isfinite(d.spearman))
        fitted_textf(false,
                     "Spearman(position, last change) = %.2f (1 = left to right); %d revised",
                     d.spearman, d.revised);
}

}  // namespace cl::viz

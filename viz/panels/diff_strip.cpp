// Panel 7: the diff against the baseline at the same step: positions whose token differs from
// the baseline's (both decoded) are marked, with the first divergence step.
#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/text_fit.h"

namespace cl::viz {

void draw_diff_strip(ColumnContext& c) {
    if (!c.baseline || c.baseline == &c.run) {
        fitted_text(c.baseline ? "baseline column" : "add `none` to compare against the baseline",
                    true);
        return;
    }
    if (c.step < 0 || c.baseline->steps.empty()) return;
    const auto& s = *c.run.steps[static_cast<size_t>(c.step)];
    const auto& b = *c.baseline->steps[static_cast<size_t>(
        std::min<int32_t>(c.step, static_cast<int32_t>(c.baseline->steps.size()) - 1))];
    const auto& pal = palette(c.view.dark);
    const int32_t P = c.run.info.prompt_len, L = s.seq_len;
    const float w = c.width / std::max(1, L - P);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetFontSize() * 0.8f;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    int differ = 0;
    // Runs of equal colour are one rectangle each, so long sequences stay cheap to draw.
    int32_t run_start = P;
    ImU32 run_color = 0;
    auto flush = [&](int32_t end) {
        if (end > run_start)
            dl->AddRectFilled({pos.x + (run_start - P) * w, pos.y},
                              {pos.x + (end - P) * w, pos.y + h}, run_color);
    };
    for (int32_t i = P; i < L && static_cast<size_t>(i) < b.tokens.size(); ++i) {
        const bool both = s.states[static_cast<size_t>(i)] != trace::TokenState::Masked &&
                          b.states[static_cast<size_t>(i)] != trace::TokenState::Masked;
        const bool diff =
            both && s.tokens[static_cast<size_t>(i)] != b.tokens[static_cast<size_t>(i)];
        differ += diff;
        const ImU32 col = !both ? pal.masked : diff ? pal.bad : pal.grid;
        if (i == P) run_color = col;
        if (col != run_color) {
            flush(i);
            run_start = i;
            run_color = col;
        }
    }
    flush(std::min<int32_t>(L, static_cast<int32_t>(b.tokens.size())));
    ImGui::Dummy({c.width, h});
    const auto m = column_metrics(c.run, c.baseline, c.step);
    fitted_textf(true, "vs baseline: %d tokens differ; first divergence %s", differ,
                 m.first_divergence < 0
                     ? "none"
                     : ("at step " + std::to_string(m.first_divergence)).c_str());
}

}  // namespace cl::viz

// Panel 3: step x token timeline. Rows = steps, columns = positions; colour = state after the
// step, brightened where the row was recomputed (at any layer). One RGBA texture, never per-cell
// rectangles. The current step is a cursor line; click to seek.
#include <algorithm>

#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/text_fit.h"

namespace cl::viz {

void draw_timeline(ColumnContext& c) {
    const auto n_steps = static_cast<int32_t>(c.run.steps.size());
    if (n_steps == 0) return;
    const int32_t L = c.run.steps.front()->seq_len;
    const int32_t P = std::max(0, c.run.info.prompt_len - 4);
    const int32_t W = std::max(1, L - P);
    const std::string key = "timeline/" + std::to_string(c.run.info.run_id) + "/" +
                            std::to_string(n_steps) + "/" + (c.view.dark ? "d" : "l");
    ImTextureID tex = c.textures.cached(key);
    if (!tex) {
        std::vector<uint32_t> px(static_cast<size_t>(W) * static_cast<size_t>(n_steps));
        for (int32_t t = 0; t < n_steps; ++t) {
            const auto& s = *c.run.steps[static_cast<size_t>(t)];
            for (int32_t i = P; i < L && i < s.seq_len; ++i) {
                ImU32 col = state_color(s.states[static_cast<size_t>(i)], c.view.dark);
                const bool recomputed =
                    s.n_layers > 0 && s.action(s.n_layers - 1, i) == trace::RowAction::Recomputed;
                if (recomputed && s.states[static_cast<size_t>(i)] == trace::TokenState::Masked)
                    col = palette(c.view.dark).recomputed;
                px[static_cast<size_t>(t) * static_cast<size_t>(W) + static_cast<size_t>(i - P)] =
                    to_rgba8(col);
            }
        }
        tex = c.textures.rgba_texture(key, W, n_steps, px);
    }
    const float height = std::clamp(static_cast<float>(n_steps) * 2.f, ImGui::GetFontSize() * 3,
                                    ImGui::GetFontSize() * 10);
    fitted_textf(true, "steps x positions (%s rows recomputed: orange)",
                 c.run.info.noise_process == "uniform" ? "noisy" : "masked");
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    const ImVec2 size{c.width, height};
    ImGui::InvisibleButton("##timeline", size);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const PositionAxis axis = position_axis(c.view, P, W);
    dl->AddImage(tex, pos, {pos.x + size.x, pos.y + size.y}, {axis.u0, 0.f}, {axis.u1, 1.f});
    if (c.step >= 0) {
        const float y = pos.y + (c.step + 0.5f) / n_steps * size.y;
        dl->AddLine({pos.x, y}, {pos.x + size.x, y}, palette(c.view.dark).text, 1.f);
    }
    if (ImGui::IsItemHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const int32_t step =
            std::clamp(static_cast<int32_t>((m.y - pos.y) / size.y * n_steps), 0, n_steps - 1);
        const int32_t position = axis.at((m.x - pos.x) / size.x);
        c.view.hovered_pos = position;
        ImGui::SetTooltip("step %d, position %d (click to seek; Ctrl+wheel zooms)", step, position);
        if (ImGui::IsMouseClicked(0)) c.view.seek_request = step;
    }
    const std::string zoom =
        handle_position_zoom(c.view, axis, P, W, (ImGui::GetIO().MousePos.x - pos.x) / size.x);
    if (!zoom.empty()) fitted_textf(true, "%s", zoom.c_str());
}

}  // namespace cl::viz

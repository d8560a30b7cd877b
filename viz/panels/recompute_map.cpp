// Panel 4: layer x token for the current step: what each layer did with each row (recomputed,
// K/V reused, probed only, features reused), shaded by cache age (older = darker). Layers where a
// trigger fired carry a marker on the left (e.g. Elastic-Cache's l*).
#include <algorithm>

#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/plot.h"
#include "viz/text_fit.h"

namespace cl::viz {

void draw_recompute_map(ColumnContext& c) {
    if (c.step < 0) return;
    const auto& s = *c.run.steps[static_cast<size_t>(c.step)];
    const int32_t N = s.n_layers, L = s.seq_len;
    if (N <= 0 || L <= 0) return;
    const std::string key = "recompute/" + std::to_string(c.run.info.run_id) + "/" +
                            std::to_string(s.step) + (c.view.dark ? "d" : "l");
    ImTextureID tex = c.textures.cached(key);
    if (!tex) {
        std::vector<uint32_t> px(static_cast<size_t>(N) * static_cast<size_t>(L));
        for (int32_t l = 0; l < N; ++l)
            for (int32_t i = 0; i < L; ++i) {
                const size_t k =
                    static_cast<size_t>(l) * static_cast<size_t>(L) + static_cast<size_t>(i);
                ImU32 col = action_color(s.actions[k], c.view.dark);
                if (s.actions[k] != trace::RowAction::Recomputed && !s.cache_age.empty()) {
                    // Shade by age: a row reused for 32+ steps is drawn at 45% brightness.
                    const float f = 1.f - 0.55f * std::min(1.f, s.cache_age[k] / 32.f);
                    const auto r = static_cast<int>(((col >> IM_COL32_R_SHIFT) & 0xff) * f);
                    const auto g = static_cast<int>(((col >> IM_COL32_G_SHIFT) & 0xff) * f);
                    const auto b = static_cast<int>(((col >> IM_COL32_B_SHIFT) & 0xff) * f);
                    col = IM_COL32(r, g, b, 255);
                }
                px[k] = to_rgba8(col);
            }
        tex = c.textures.rgba_texture(key, L, N, px);
    }
    const PositionAxis axis = position_axis(c.view, 0, L);
    const float marker = ImGui::GetFontSize() * 0.8f;
    // Taller with many layers: 32 layers keep about 4 px each.
    const float tallest = ImGui::GetFontSize() * std::max(8.f, N / 3.f);
    fitted_textf(true, "layers x positions at step %d", s.step);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    const ImVec2 size{std::max(10.f, c.width - marker),
                      std::clamp(N * 10.f, ImGui::GetFontSize() * 2, tallest)};
    ImGui::InvisibleButton("##recompute", {size.x + marker, size.y});
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 img{pos.x + marker, pos.y};
    dl->AddImage(tex, img, {img.x + size.x, img.y + size.y}, {axis.u0, 0.f}, {axis.u1, 1.f});
    const std::string zoom =
        handle_position_zoom(c.view, axis, 0, L, (ImGui::GetIO().MousePos.x - img.x) / size.x);
    const float row_h = size.y / N;
    for (const auto& t : s.triggers)
        if (t.fired && t.layer >= 0 && t.layer < N) {
            const float y = pos.y + (t.layer + 0.5f) * row_h;
            dl->AddTriangleFilled({pos.x, y - 4}, {pos.x, y + 4}, {pos.x + marker - 2, y},
                                  palette(c.view.dark).trigger);
        }
    for (size_t i = 0; i < c.view.annotations.size(); ++i) {
        const auto& a = c.view.annotations[i];
        if ((a.step >= 0 && a.step != s.step) || a.position < 0 || a.position >= L) continue;
        const float y =
            a.layer >= 0 && a.layer < N ? img.y + (a.layer + 0.5f) * row_h : img.y + size.y * 0.5f;
        if (a.position < axis.first || a.position >= axis.first + axis.count) continue;
        plot::annotation_marker(dl, {img.x + axis.fraction_of(a.position + 0.5f) * size.x, y},
                                static_cast<int>(i + 1), a.text, c.view.dark);
    }
    if (ImGui::IsItemHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const int32_t layer = std::clamp(static_cast<int32_t>((m.y - img.y) / row_h), 0, N - 1);
        const int32_t row = axis.at((m.x - img.x) / size.x);
        c.view.hovered_pos = row;
        const size_t k =
            static_cast<size_t>(layer) * static_cast<size_t>(L) + static_cast<size_t>(row);
        ImGui::BeginTooltip();
        ImGui::Text("layer %d, position %d: %s", layer, row, trace::to_string(s.actions[k]));
        if (!s.cache_age.empty()) ImGui::Text("cache age %d steps", s.cache_age[k]);
        for (const auto& t : s.triggers)
            if (t.layer == layer || t.layer < 0)
                ImGui::Text("%s%s: value %.3f, threshold %.3f -> %s", t.fired ? "* " : "",
                            t.kind.c_str(), t.value, t.threshold, t.action.c_str());
        ImGui::EndTooltip();
        if (ImGui::IsMouseClicked(0)) c.view.layer = layer;
    }
    if (!zoom.empty()) fitted_textf(true, "%s", zoom.c_str());
    // The legend belongs to the panel: a figure of this panel alone keeps it.
    for (auto a : {trace::RowAction::Recomputed, trace::RowAction::KvReused,
                   trace::RowAction::ProbedOnly, trace::RowAction::FeatureReused})
        plot::legend_item(trace::to_string(a), action_color(a, c.view.dark));
    ImGui::NewLine();
}

}  // namespace cl::viz

// Panel 5: the attention map of the chosen layer/head (head mean by default): query rows that were
// computed this step x every key, the full bidirectional matrix, colour-mapped on the GPU. A strip
// above the map shows each key column's cache status at that layer (reused keys are stale).
#include <algorithm>
#include <cmath>

#include "viz/palette.h"
#include "viz/panels/panels.h"

namespace cl::viz {

void draw_attention_map(ColumnContext& c) {
    if (c.step < 0) return;
    const auto& s = *c.run.steps[static_cast<size_t>(c.step)];
    if (!c.view.figure_mode) {
        ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
        ImGui::SliderInt("layer##att", &c.view.layer, 0, std::max(0, s.n_layers - 1));
        ImGui::SameLine();
        ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
        ImGui::SliderInt("head (-1 mean)##att", &c.view.head, -1,
                         std::max(0, c.run.info.n_heads - 1));
    }
    const trace::AttentionMap* map = nullptr;
    for (const auto& a : s.attention)
        if (a.layer == c.view.layer && a.head == c.view.head) map = &a;
    if (!map || map->rows == 0 || map->cols == 0) {
        ImGui::TextDisabled("no attention recorded for layer %d head %d at this step", c.view.layer,
                            c.view.head);
        return;
    }
    const int32_t L = map->cols;
    float hi = 0.f;
    for (float v : map->data)
        if (std::isfinite(v)) hi = std::max(hi, v);
    const std::string key = "attn/" + std::to_string(c.run.info.run_id) + "/" +
                            std::to_string(s.step) + "/" + std::to_string(c.view.layer) + "/" +
                            std::to_string(c.view.head) + "/" +
                            std::to_string(static_cast<int>(c.view.colormap));
    ImTextureID tex = c.textures.cached(key);
    if (!tex) {
        // Expand to a full L x L image: rows not computed this step stay NaN (drawn grey). The
        // texture holds sqrt(p) so weak but real attention stays visible; the legend says so.
        std::vector<float> img(static_cast<size_t>(L) * static_cast<size_t>(L), NAN);
        for (int32_t r = 0; r < map->rows; ++r) {
            const int32_t q = map->row_index[static_cast<size_t>(r)];
            if (q < 0 || q >= L) continue;
            for (int32_t k = 0; k < L; ++k) {
                const float v = map->data[static_cast<size_t>(r) * static_cast<size_t>(L) +
                                          static_cast<size_t>(k)];
                img[static_cast<size_t>(q) * static_cast<size_t>(L) + static_cast<size_t>(k)] =
                    std::isfinite(v) ? std::sqrt(std::max(0.f, v)) : NAN;
            }
        }
        tex = c.textures.scalar_texture(key, L, L, img, 0.f, std::sqrt(std::max(hi, 1e-6f)),
                                        c.view.colormap);
    }
    const float side = std::min(c.width, ImGui::GetFontSize() * 18);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float strip = 4.f;
    const int32_t layer = std::clamp(c.view.layer, 0, std::max(0, s.n_layers - 1));
    for (int32_t k = 0; k < L && layer < s.n_layers; ++k) {
        const float x0 = pos.x + side * k / L, x1 = pos.x + side * (k + 1) / L;
        dl->AddRectFilled({x0, pos.y}, {std::max(x0 + 1, x1), pos.y + strip},
                          action_color(s.action(layer, k), c.view.dark));
    }
    ImGui::Dummy({side, strip + 1});
    const ImVec2 ip = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("##attention", {side, side});
    dl->AddImage(tex, ip, {ip.x + side, ip.y + side});
    if (ImGui::IsItemHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const int32_t q = std::clamp(static_cast<int32_t>((m.y - ip.y) / side * L), 0, L - 1);
        const int32_t k = std::clamp(static_cast<int32_t>((m.x - ip.x) / side * L), 0, L - 1);
        float p = NAN;
        for (int32_t r = 0; r < map->rows; ++r)
            if (map->row_index[static_cast<size_t>(r)] == q)
                p = map->data[static_cast<size_t>(r) * static_cast<size_t>(L) +
                              static_cast<size_t>(k)];
        ImGui::SetTooltip("query %d -> key %d: p = %.4f (key %s at layer %d)", q, k, p,
                          trace::to_string(s.action(layer, k)), layer);
        c.view.hovered_pos = k;
    }
    ImGui::TextDisabled("sqrt(p), 0 .. %.3f; grey rows: not computed this step", hi);
}

}  // namespace cl::viz

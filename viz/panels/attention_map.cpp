// Panel 5: the attention map of the chosen layer/head (head mean by default): query rows that were
// computed this step x every key, the full bidirectional matrix, colour-mapped on the GPU. A strip
// above the map shows each key column's cache status at that layer (reused keys are stale).
#include <algorithm>
#include <cmath>

#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/text_fit.h"

namespace cl::viz {

namespace {

// d2Cache's attention rollout over the step's head-mean maps: A_l = rownorm(attn_l + I) for the
// rows computed at layer l, identity for the others; influence = column sums of A_N ... A_1.
// Returns an empty vector when some layer's map is missing.
std::vector<double> rollout_influence(const trace::StepRecord& s) {
    const size_t L = static_cast<size_t>(s.seq_len);
    std::vector<const trace::AttentionMap*> maps(static_cast<size_t>(s.n_layers), nullptr);
    for (const auto& a : s.attention)
        if (a.head == -1 && a.layer >= 0 && a.layer < s.n_layers && a.full_resolution() &&
            static_cast<size_t>(a.cols) == L)
            maps[static_cast<size_t>(a.layer)] = &a;
    for (auto* m : maps)
        if (!m) return {};
    std::vector<double> v(L, 1.0);
    for (size_t layer = maps.size(); layer-- > 0;) {  // the last layer first
        const auto& m = *maps[layer];
        std::vector<double> next = v;
        for (int32_t r = 0; r < m.rows; ++r) {
            const auto q = static_cast<size_t>(m.row_index[static_cast<size_t>(r)]);
            const double w = v[q];
            next[q] -= 0.5 * w;  // the row becomes (attn + I) / 2
            for (size_t k = 0; k < L; ++k) next[k] += 0.5 * w * m.prob(r, static_cast<int32_t>(k));
        }
        v = std::move(next);
    }
    return v;
}

void draw_rollout(ColumnContext& c, const trace::StepRecord& s, float width) {
    const auto v = rollout_influence(s);
    if (v.empty()) {
        fitted_textf(true,
                     "rollout: needs the head-mean map of every layer at this step at full "
                     "resolution (Run setup: attention budget, full-resolution layers)");
        return;
    }
    const double hi = *std::max_element(v.begin(), v.end());
    const float h = ImGui::GetFontSize() * 2.5f;
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("##rollout", {width, h});
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const auto& pal = palette(c.view.dark);
    dl->AddRectFilled(pos, {pos.x + width, pos.y + h}, pal.background);
    const float w = width / static_cast<float>(v.size());
    for (size_t k = 0; k < v.size(); ++k) {
        const float f = hi > 0 ? static_cast<float>(v[k] / hi) : 0.f;
        const ImVec2 a{pos.x + w * static_cast<float>(k), pos.y + h * (1.f - f)};
        dl->AddRectFilled(a, {a.x + std::max(1.f, w), pos.y + h},
                          action_color(s.action(0, static_cast<int32_t>(k)), c.view.dark));
    }
    if (ImGui::IsItemHovered()) {
        const auto k = static_cast<size_t>(
            std::clamp((ImGui::GetIO().MousePos.x - pos.x) / width, 0.f, 0.999f) * v.size());
        ImGui::SetTooltip(
            "position %zu: rollout influence %.3f (column sum of the attention rollout)", k, v[k]);
    }
    fitted_textf(true,
                 "attention rollout influence per position (d2Cache stage 2 picks its nucleus)");
}

}  // namespace

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
    } else {  // a figure names what the sliders chose
        if (c.view.head < 0)
            fitted_textf(true, "layer %d, mean of heads", c.view.layer);
        else
            fitted_textf(true, "layer %d, head %d", c.view.layer, c.view.head);
    }
    const trace::AttentionMap* map = nullptr;
    for (const auto& a : s.attention)
        if (a.layer == c.view.layer && a.head == c.view.head) map = &a;
    if (!map || map->rows == 0 || map->cols == 0) {
        fitted_textf(true, "no attention recorded for layer %d head %d at this step", c.view.layer,
                     c.view.head);
        return;
    }
    const int32_t L = map->key_count(), C = map->cols;
    const int32_t kt = std::max(map->key_tile, 1), rt = std::max(map->row_tile, 1);
    const int32_t image_rows = (L + rt - 1) / rt;  // a pooled map: one image row a tile of rows
    float hi = 0.f;
    for (float v : map->row_scale)  // the largest probability of each row
        if (std::isfinite(v)) hi = std::max(hi, v);
    const std::string key = "attn/" + std::to_string(c.run.info.run_id) + "/" +
                            std::to_string(s.step) + "/" + std::to_string(c.view.layer) + "/" +
                            std::to_string(c.view.head) + "/" +
                            std::to_string(static_cast<int>(c.view.colormap));
    ImTextureID tex = c.textures.cached(key);
    if (!tex) {
        // Expand to an image of every position (or tile of positions) x every stored column: rows
        // not computed this step stay NaN (drawn grey). The texture holds sqrt(p) so weak but real
        // attention stays visible; the legend says so.
        std::vector<float> img(static_cast<size_t>(image_rows) * static_cast<size_t>(C), NAN);
        for (int32_t r = 0; r < map->rows; ++r) {
            const int32_t q = map->row_index[static_cast<size_t>(r)] / rt;
            if (q < 0 || q >= image_rows) continue;
            for (int32_t k = 0; k < C; ++k)
                img[static_cast<size_t>(q) * static_cast<size_t>(C) + static_cast<size_t>(k)] =
                    std::sqrt(map->prob(r, k));
        }
        tex = c.textures.scalar_texture(key, C, image_rows, img, 0.f,
                                        std::sqrt(std::max(hi, 1e-6f)), c.view.colormap);
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
        const float p = map->prob_at(q, k);
        if (map->full_resolution())
            ImGui::SetTooltip("query %d -> key %d: p = %.4f (key %s at layer %d)", q, k, p,
                              trace::to_string(s.action(layer, k)), layer);
        else
            ImGui::SetTooltip("queries %d-%d -> keys %d-%d: mean p = %.4f (key %d %s at layer %d)",
                              q - q % rt, std::min(L, q - q % rt + rt) - 1, k - k % kt,
                              std::min(L, k - k % kt + kt) - 1, p, k,
                              trace::to_string(s.action(layer, k)), layer);
        c.view.hovered_pos = k;
    }
    fitted_textf(true, "layer %d, %s: sqrt(p), 0 .. %.3f; grey rows: not computed this step",
                 map->layer, map->describe().c_str(), hi);
    if (c.run.info.policy == "d2cache") draw_rollout(c, s, c.width);
}

}  // namespace cl::viz

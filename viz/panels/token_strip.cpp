// Panel 2: the sequence at the current step. Colour = state (prompt, masked, decoded earlier,
// decoded now); a second encoding marks rows recomputed this step (an outline) and the decoded-now
// tokens carry an underline, so state never depends on colour alone. Under uniform noise "masked"
// reads "noisy" (not final yet) and ticks on a cell count how often it changed. Hover shows the
// inspector tooltip; click pins the position.
#include <algorithm>
#include <cmath>

#include "engine/trace/drift_analysis.h"
#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/plot.h"
#include "viz/text_fit.h"

namespace cl::viz {
namespace {

// Under uniform noise a position is never masked: "noisy" until its block ends. What a uniform
// cell shows besides its state: how often the position changed up to this step.
struct UniformCells {
    bool on = false;
    std::vector<int32_t> changes;  // (G) up to the current step
};

UniformCells uniform_cells(const ColumnContext& c) {
    UniformCells u;
    u.on = c.run.info.noise_process == "uniform";
    if (u.on) u.changes = trace::change_counts(c.run.info, c.run.steps, c.step);
    return u;
}

int32_t changes_at(const UniformCells& u, const ColumnContext& c, int32_t position) {
    const int32_t g = position - c.run.info.prompt_len;
    return u.on && g >= 0 ? u.changes[static_cast<size_t>(g)] : 0;
}

// Change count as ticks along the cell's top edge (up to 4; a fifth tick-wide bar means more).
void draw_change_ticks(ImDrawList* dl, ImVec2 a, ImVec2 b, int32_t changes, ImU32 color) {
    const int n = std::min(changes, 5);
    const float w = (b.x - a.x) / 5.f;
    for (int t = 0; t < n; ++t)
        dl->AddRectFilled({a.x + t * w, a.y}, {a.x + (t + 1) * w - 1, a.y + 2}, color);
}

bool recomputed_at_any_layer(const trace::StepRecord& s, int32_t i) {
    for (int32_t l = 0; l < s.n_layers; ++l)
        if (s.action(l, i) == trace::RowAction::Recomputed) return true;
    return false;
}

// Long sequences: one texture instead of thousands of rectangles, wrapped into rows of cells at
// least kMinCell pixels wide so that every position can still be seen, hovered and pinned (one
// row of G = 1024 sub-pixel cells could not).
constexpr float kMinCell = 4.f;

void draw_strip_texture(ColumnContext& c, const trace::StepRecord& s, int32_t from, int32_t end,
                        float h) {
    const auto& pal = palette(c.view.dark);
    const int32_t count = end - from;
    const int per_row = std::clamp(static_cast<int>(c.width / kMinCell), 1, count);
    const int rows = (count + per_row - 1) / per_row;
    const float cell_w = c.width / static_cast<float>(per_row);
    const float row_h = std::max(6.f, h * 0.5f);
    std::vector<uint32_t> px(static_cast<size_t>(per_row) * static_cast<size_t>(rows),
                             to_rgba8(pal.background));  // (rows, per_row); the tail is empty
    for (int32_t i = from; i < end; ++i) {
        const auto st = s.states[static_cast<size_t>(i)];
        const bool recomputed =
            s.n_layers > 0 && s.action(s.n_layers - 1, i) == trace::RowAction::Recomputed;
        px[static_cast<size_t>(i - from)] =
            to_rgba8(recomputed && st == trace::TokenState::Masked ? pal.recomputed
                                                                   : state_color(st, c.view.dark));
    }
    const std::string key = "strip/" + std::to_string(c.run.info.run_id) + "/" +
                            std::to_string(s.step) + "/" + std::to_string(per_row) + "/" +
                            std::to_string(from) + "-" + std::to_string(end);
    ImTextureID tex = c.textures.rgba_texture(key, per_row, rows, px);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    const ImVec2 size{c.width, row_h * static_cast<float>(rows)};
    ImGui::InvisibleButton("##tokens", size);
    ImGui::GetWindowDrawList()->AddImage(tex, pos, {pos.x + size.x, pos.y + size.y});
    if (!ImGui::IsItemHovered()) return;
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int col = std::clamp(static_cast<int>((m.x - pos.x) / cell_w), 0, per_row - 1);
    const int row = std::clamp(static_cast<int>((m.y - pos.y) / row_h), 0, rows - 1);
    const int32_t k = row * per_row + col;
    if (k >= count) return;
    const int32_t i = from + k;
    c.view.hovered_pos = i;
    const bool uniform = c.run.info.noise_process == "uniform";
    ImGui::SetTooltip("position %d (%s), token %d", i,
                      state_label(s.states[static_cast<size_t>(i)], uniform),
                      s.tokens[static_cast<size_t>(i)]);
    if (ImGui::IsMouseClicked(0)) c.view.pinned_pos = i;
}

std::string token_text(const ColumnContext& c, int32_t id) {
    auto it = c.run.token_text.find(id);
    return it != c.run.token_text.end() ? it->second : std::string("?");
}

// The inspector tooltip of one position.
void cell_tooltip(const ColumnContext& c, const trace::StepRecord& s, int32_t i,
                  const UniformCells& uni) {
    const auto state = s.states[static_cast<size_t>(i)];
    const int32_t id = s.tokens[static_cast<size_t>(i)];
    const int32_t p = s.predicted[static_cast<size_t>(i)];
    ImGui::BeginTooltip();
    ImGui::Text("position %d  (%s)", i, state_label(state, uni.on));
    ImGui::Text("token %d: \"%s\"", id, token_text(c, id).c_str());
    if (uni.on && i >= c.run.info.prompt_len) {
        const bool open =
            state == trace::TokenState::Masked || state == trace::TokenState::DecodedNow;
        ImGui::Text("changed %d times; %s", changes_at(uni, c, i),
                    !open ? "final (its block has ended)"
                          : (p == id ? "settled: the prediction agrees" : "unsettled"));
    }
    const float conf = s.confidence[static_cast<size_t>(i)];
    if (std::isfinite(conf))
        ImGui::Text("candidate %d \"%s\", confidence %.3f", p, token_text(c, p).c_str(), conf);
    int recomputed_layers = 0;
    for (int32_t l = 0; l < s.n_layers; ++l)
        recomputed_layers += s.action(l, i) == trace::RowAction::Recomputed;
    ImGui::Text("recomputed at %d of %d layers; cache age at layer 0: %d steps", recomputed_layers,
                s.n_layers, s.cache_age.empty() ? 0 : s.cache_age[static_cast<size_t>(i)]);
    ImGui::EndTooltip();
}

// One cell [a, b]: state colour, recompute outline, decoded-now underline, change ticks, pin and
// lesson annotations.
void draw_cell(ColumnContext& c, const trace::StepRecord& s, int32_t i, ImVec2 a, ImVec2 b,
               const UniformCells& uni) {
    const auto& pal = palette(c.view.dark);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const auto state = s.states[static_cast<size_t>(i)];
    dl->AddRectFilled(a, b, state_color(state, c.view.dark));
    if (recomputed_at_any_layer(s, i)) dl->AddRect(a, b, pal.recomputed, 0, 0, 1.5f);
    if (state == trace::TokenState::DecodedNow)
        dl->AddLine({a.x, b.y - 1}, {b.x, b.y - 1}, pal.bad, 2.f);
    if (uni.on) draw_change_ticks(dl, a, b, changes_at(uni, c, i), pal.text);
    if (i == c.view.pinned_pos)
        dl->AddRect({a.x - 1, a.y - 1}, {b.x + 1, b.y + 1}, pal.text, 0, 0, 2.f);
    for (size_t n = 0; n < c.view.annotations.size(); ++n) {
        const auto& note = c.view.annotations[n];
        if (note.position == i && (note.step < 0 || note.step == s.step))
            plot::annotation_marker(dl, {(a.x + b.x) / 2, (a.y + b.y) / 2}, static_cast<int>(n + 1),
                                    note.text, c.view.dark);
    }
}

// The response as text under the strip: masks as a shaded block; under uniform noise, blocks not
// reached yet as "~" and the active block's current tokens as text.
std::string response_text(const ColumnContext& c, const trace::StepRecord& s, bool uniform) {
    const auto& info = c.run.info;
    std::string text;
    for (int32_t i = info.prompt_len; i < s.seq_len; ++i) {
        const bool masked = s.states[static_cast<size_t>(i)] == trace::TokenState::Masked;
        const int32_t block = info.block_len > 0 ? (i - info.prompt_len) / info.block_len : 0;
        if (masked && uniform && block > s.block) {
            text += "~";
            continue;
        }
        if (masked && !uniform) {
            text += "\xe2\x96\x91";
            continue;
        }
        const int32_t id = s.tokens[static_cast<size_t>(i)];
        if (id == info.eos_id) break;
        text += token_text(c, id);
    }
    return text;
}

}  // namespace

const char* state_label(trace::TokenState st, bool uniform) {
    if (!uniform) return trace::to_string(st);
    switch (st) {
        case trace::TokenState::Masked:
            return "noisy";
        case trace::TokenState::DecodedNow:
            return "changed now";
        case trace::TokenState::DecodedEarlier:
            return "final";
        case trace::TokenState::Prompt:
            break;
    }
    return trace::to_string(st);
}

void draw_token_strip(ColumnContext& c) {
    if (c.step < 0 || c.run.steps.empty()) {
        ImGui::TextDisabled("no steps yet");
        return;
    }
    const auto& s = *c.run.steps[static_cast<size_t>(c.step)];
    const float h = ImGui::GetTextLineHeight() + 4;
    const float cell = ImGui::GetFontSize() * 0.75f;
    const float avail = std::max(40.f, c.width);
    const int per_row = std::max(1, static_cast<int>(avail / cell));
    // A little prompt context, or the window the timeline and recompute map are zoomed on: at
    // most 512 positions are drawn as cells with their tooltips, outlines and pins.
    int32_t from = std::max(0, c.run.info.prompt_len - 8), end = s.seq_len;
    const PositionAxis axis = position_axis(c.view, 0, s.seq_len);
    if (axis.zoomed) {
        from = axis.first;
        end = axis.first + axis.count;
        fitted_textf(true, "positions %d-%d (zoomed with the timeline)", from, end - 1);
    }
    const int32_t count = end - from;
    if (count > 512) {
        draw_strip_texture(c, s, from, end, h);
        return;
    }
    const UniformCells uni = uniform_cells(c);
    const int rows = (count + per_row - 1) / per_row;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("##tokens", {avail, std::max(h, static_cast<float>(rows) * h)});
    const bool hovered = ImGui::IsItemHovered();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    for (int32_t i = from; i < end; ++i) {
        const int k = i - from;
        const int row = k / per_row;  // whole rows
        const ImVec2 a{origin.x + static_cast<float>(k % per_row) * cell,
                       origin.y + static_cast<float>(row) * h};
        const ImVec2 b{a.x + cell - 1, a.y + h - 2};
        draw_cell(c, s, i, a, b, uni);
        if (hovered && mouse.x >= a.x && mouse.x < b.x + 1 && mouse.y >= a.y && mouse.y < b.y + 2) {
            c.view.hovered_pos = i;
            if (ImGui::IsMouseClicked(0)) c.view.pinned_pos = (c.view.pinned_pos == i) ? -1 : i;
            cell_tooltip(c, s, i, uni);
        }
    }
    if (!axis.zoomed) {  // the whole response; a zoomed strip shows its window only
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + avail);
        ImGui::TextUnformatted(response_text(c, s, uni.on).c_str());
        ImGui::PopTextWrapPos();
    }
}

}  // namespace cl::viz

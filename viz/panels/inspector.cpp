// The inspector: one position followed through the run and across the policy columns (pin it by
// clicking a token). Per column: the token, its decode step, the top-k candidates at the current
// step, confidence / entropy / margin over steps, per-layer cache history (last recompute, age,
// drift tests) and the attention the position receives at the chosen layer.
#include <algorithm>
#include <cmath>

#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/plot.h"

namespace cl::viz {

namespace {

std::string text_of(const RunView& run, int32_t id) {
    auto it = run.token_text.find(id);
    std::string t = it != run.token_text.end() ? it->second : "?";
    for (auto& ch : t)
        if (ch == '\n') ch = ' ';
    return "\"" + t + "\"";
}

// The token at the position, its state and the step that decoded it.
void draw_token_line(const RunView& run, const trace::StepRecord& s, size_t p) {
    ImGui::Text("token %d %s (%s)", s.tokens[p], text_of(run, s.tokens[p]).c_str(),
                trace::to_string(s.states[p]));
    int32_t decoded_at = -1;
    for (const auto& r : run.steps)
        if (r->states[p] == trace::TokenState::DecodedNow) {
            decoded_at = r->step;
            break;
        }
    ImGui::Text("decoded at step %s", decoded_at < 0 ? "-" : std::to_string(decoded_at).c_str());
}

// Top-k at the latest step (<= current) that predicted this row.
void draw_candidates(const RunView& run, int32_t step, size_t p) {
    const trace::StepRecord* pred = nullptr;
    for (int32_t t = step; t >= 0 && !pred; --t) {
        const auto& r = *run.steps[static_cast<size_t>(t)];
        if (!r.topk_ids.empty() && r.topk_ids[p * trace::StepRecord::kTopK] >= 0) pred = &r;
    }
    if (!pred) return;
    ImGui::TextDisabled("candidates at step %d:", pred->step);
    for (int k = 0; k < trace::StepRecord::kTopK; ++k) {
        const int32_t id = pred->topk_ids[p * trace::StepRecord::kTopK + static_cast<size_t>(k)];
        if (id < 0) break;
        const float pr = pred->topk_probs[p * trace::StepRecord::kTopK + static_cast<size_t>(k)];
        ImGui::Text("  %5.3f  %d %s", pr, id, text_of(run, id).c_str());
    }
}

// Confidence, entropy and margin over steps.
void draw_certainty_plot(const RunView& run, int32_t step, size_t p, const Palette& pal) {
    std::vector<float> xs, conf, ent, mar;
    for (const auto& r : run.steps) {
        xs.push_back(static_cast<float>(r->step));
        conf.push_back(r->confidence.size() > p ? r->confidence[p] : NAN);
        ent.push_back(r->entropy.size() > p ? r->entropy[p] : NAN);
        mar.push_back(r->margin.size() > p ? r->margin[p] : NAN);
    }
    plot::Plot pl;
    if (plot::begin_plot("confidence / margin / entropy", {-1, ImGui::GetFontSize() * 4.5f}, pl)) {
        float hi = 1.f;
        for (float e : ent)
            if (std::isfinite(e)) hi = std::max(hi, e);
        plot::setup_axes(pl, 0, std::max(1, static_cast<int>(xs.size()) - 1), 0, hi);
        plot::plot_line(pl, xs.data(), conf.data(), static_cast<int>(xs.size()), pal.accent);
        plot::plot_line(pl, xs.data(), mar.data(), static_cast<int>(xs.size()), pal.recomputed);
        plot::plot_line(pl, xs.data(), ent.data(), static_cast<int>(xs.size()), pal.trigger);
        plot::plot_vline(pl, step, pal.text_dim);
        plot::end_plot(pl);
    }
    plot::legend_item("confidence", pal.accent);
    plot::legend_item("margin", pal.recomputed);
    plot::legend_item("entropy", pal.trigger);
    ImGui::NewLine();
}

// The drift test of a layer this step as "value / threshold", "*" when it fired; "-" if none.
std::string drift_text(const trace::StepRecord& s, int32_t layer) {
    std::string drift = "-";
    for (const auto& e : s.triggers)
        if (e.layer == layer && std::isfinite(e.value) && std::isfinite(e.threshold)) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.3f / %.3f%s", e.value, e.threshold,
                          e.fired ? " *" : "");
            drift = buf;
        }
    return drift;
}

// Per-layer cache history up to the current step.
void draw_layer_history(const RunView& run, const trace::StepRecord& s, int32_t step, int32_t pos) {
    if (!ImGui::BeginTable("##layers", 4, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg))
        return;
    ImGui::TableSetupColumn("layer");
    ImGui::TableSetupColumn("now");
    ImGui::TableSetupColumn("last recompute");
    ImGui::TableSetupColumn("drift / threshold");
    ImGui::TableHeadersRow();
    for (int32_t l = 0; l < s.n_layers; ++l) {
        int32_t last = -1;
        for (int32_t t = step; t >= 0 && last < 0; --t)
            if (run.steps[static_cast<size_t>(t)]->action(l, pos) == trace::RowAction::Recomputed)
                last = t;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%d", l);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(trace::to_string(s.action(l, pos)));
        ImGui::TableNextColumn();
        ImGui::Text("%s", last < 0 ? "never" : ("step " + std::to_string(last)).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(drift_text(s, l).c_str());
    }
    ImGui::EndTable();
}

// Attention received at the chosen layer: mean over the recorded query rows (over the key's tile
// where the map is pooled).
void draw_attention_received(const trace::StepRecord& s, int32_t pos, const ViewState& view) {
    for (const auto& a : s.attention) {
        const int32_t col = a.column_of(pos);
        if (a.layer != view.layer || a.head != view.head || a.rows == 0 || col < 0 || col >= a.cols)
            continue;
        double sum = 0;
        for (int32_t r = 0; r < a.rows; ++r) sum += a.prob(r, col);
        if (a.full_resolution())
            ImGui::Text("attention received at layer %d: %.4f (mean over %d query rows)", a.layer,
                        sum / a.rows, a.rows);
        else
            ImGui::Text(
                "attention received at layer %d: %.4f (mean over %d stored rows; keys %d-%d, %s)",
                a.layer, sum / a.rows, a.rows, col * a.key_tile,
                std::min(a.key_count(), (col + 1) * a.key_tile) - 1, a.describe().c_str());
    }
}

// One policy's column of the inspector.
void draw_inspector_column(const RunView& run, const std::string& title, const ViewState& view,
                           int32_t pos, int32_t max_steps, const Palette& pal) {
    const int32_t step = column_step(run, view, max_steps);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.accent), "%s", title.c_str());
    if (step < 0 || pos >= run.steps[static_cast<size_t>(step)]->seq_len) {
        ImGui::TextDisabled("no data");
        return;
    }
    const auto& s = *run.steps[static_cast<size_t>(step)];
    const auto p = static_cast<size_t>(pos);
    draw_token_line(run, s, p);
    draw_candidates(run, step, p);
    draw_certainty_plot(run, step, p, pal);
    draw_layer_history(run, s, step, pos);
    draw_attention_received(s, pos, view);
}

}  // namespace

void draw_inspector(std::vector<RunView>& runs, ViewState& view) {
    const int32_t pos = view.pinned_pos >= 0 ? view.pinned_pos : view.hovered_pos;
    if (pos < 0) {
        ImGui::TextDisabled("Click a token in a strip to pin it here; hover to preview.");
        return;
    }
    ImGui::Text("position %d %s", pos,
                view.pinned_pos >= 0 ? "(pinned; click it again to unpin)" : "(hover)");
    const auto& pal = palette(view.dark);
    int32_t max_steps = 0;
    for (const auto& r : runs)
        max_steps = std::max(max_steps, static_cast<int32_t>(r.steps.size()));
    if (!ImGui::BeginTable("##inspector", static_cast<int>(std::max<size_t>(1, runs.size())),
                           ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchSame))
        return;
    for (auto& run : runs) {
        ImGui::TableNextColumn();
        ImGui::PushID(&run);
        draw_inspector_column(run, column_title(runs, run), view, pos, max_steps, pal);
        ImGui::PopID();
    }
    ImGui::EndTable();
}

}  // namespace cl::viz

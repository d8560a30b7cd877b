// Panel 1: the column header: policy, tokens/s, speedup, FLOP ratio, efficiency, agreement and
// recompute fraction, each with a tooltip giving its formula and raw numbers.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/trace/metrics.h"
#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/text_fit.h"

namespace cl::viz {

namespace {
// One metric as a label over its value; a metric that does not fit beside the previous one
// starts the next row (narrow columns).
void metric(const char* label, const char* fmt, double v, const char* formula,
            const std::string& raw) {
    char value[64] = "-";
    if (std::isfinite(v)) std::snprintf(value, sizeof value, fmt, v);
    wrap_before(std::max(ImGui::CalcTextSize(label).x, ImGui::CalcTextSize(value).x));
    ImGui::BeginGroup();
    ImGui::TextDisabled("%s", label);
    ImGui::TextUnformatted(value);
    ImGui::EndGroup();
    if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::TextUnformatted(formula);
        ImGui::TextDisabled("%s", raw.c_str());
        ImGui::EndTooltip();
    }
    ImGui::SameLine(0, ImGui::GetFontSize() * 0.9f);
}

// "answer 432: correct" for a task-item prompt (the app's one accuracy figure per run).
void draw_answer_check(const RunView& run, const Palette& pal) {
    if (!run.answer) return;
    const auto& a = *run.answer;
    if (!a.complete) {
        ImGui::TextDisabled("task item: expects %s", a.expected.c_str());
    } else {
        ImGui::PushStyleColor(ImGuiCol_Text, a.correct ? pal.accent : pal.bad);
        ImGui::Text("answer %s: %s", a.answered.empty() ? "(none)" : a.answered.c_str(),
                    a.correct ? "correct" : "wrong");
        ImGui::PopStyleColor();
        if (!a.correct) {
            ImGui::SameLine();
            ImGui::TextDisabled("(expected %s)", a.expected.c_str());
        }
    }
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "The prompt is a task-suite item: exact match of the text after the last \"Answer:\" "
            "with the answer computed from the prompt");
}

}  // namespace

void draw_header_metrics(ColumnContext& c) {
    const auto& pal = palette(c.view.dark);
    ImGui::PushStyleColor(ImGuiCol_Text, pal.accent);
    ImGui::TextUnformatted(c.title.empty() ? c.run.info.policy.c_str() : c.title.c_str());
    ImGui::PopStyleColor();
    ImGui::SameLine();
    std::string params;
    for (const auto& [k, v] : c.run.info.policy_params) params += k + "=" + v + " ";
    fitted_text(params + (c.run.status.empty() ? "" : "  [" + c.run.status + "]"), true);
    draw_answer_check(c.run, pal);
    const ColumnMetrics m = column_metrics(c.run, c.baseline, c.step);
    char raw[256];
    std::snprintf(raw, sizeof raw, "%d tokens / %.1f ms", m.generated, m.wall_ms);
    metric("tok/s", "%.1f", m.tokens_per_s, trace::kTokensPerSecondDefinition, raw);
    std::snprintf(raw, sizeof raw, "baseline vs this column over the same %zu steps",
                  c.run.steps.size());
    metric("speedup", "%.2fx", m.speedup,
           "speedup = baseline wall time / policy wall time (same steps)", raw);
    std::snprintf(raw, sizeof raw, "%.3g GFLOP computed, %.3g GFLOP for full forwards",
                  m.flops / 1e9, m.flops_full / 1e9);
    metric("FLOP-x", "%.2fx", m.flop_ratio,
           "FLOP ratio = baseline FLOPs / policy FLOPs (the ideal speedup)", raw);
    metric("effic.", "%.2f", m.efficiency, "efficiency = measured speedup / FLOP ratio", raw);
    std::snprintf(
        raw, sizeof raw, "first divergence: %s",
        m.first_divergence < 0 ? "none" : ("step " + std::to_string(m.first_divergence)).c_str());
    metric("agree", "%.0f%%", 100 * m.agreement,
           "agreement = decoded tokens equal to the baseline's / decoded tokens", raw);
    std::snprintf(raw, sizeof raw, "mean over %zu steps", c.run.steps.size());
    metric("recomp.", "%.0f%%", 100 * m.recompute,
           "recompute fraction = computed (layer, row) pairs / (N x L), averaged", raw);
    ImGui::NewLine();
}

}  // namespace cl::viz

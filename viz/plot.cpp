#include "viz/plot.h"

#include <cmath>
#include <cstdio>

#include "viz/palette.h"
#include "viz/text_fit.h"

namespace cl::viz::plot {

ImVec2 Plot::to_screen(double x, double y) const {
    const double fx = x1 > x0 ? (x - x0) / (x1 - x0) : 0.0;
    const double fy = y1 > y0 ? (y - y0) / (y1 - y0) : 0.0;
    return {min.x + static_cast<float>(fx) * (max.x - min.x),
            max.y - static_cast<float>(fy) * (max.y - min.y)};
}

double Plot::x_at(float sx) const {
    return x0 + (sx - min.x) / std::max(1.f, max.x - min.x) * (x1 - x0);
}

bool begin_plot(const char* title, ImVec2 size, Plot& p) {
    if (size.x <= 0) size.x = std::max(50.f, ImGui::GetContentRegionAvail().x);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton(title, size);
    p.hovered = ImGui::IsItemHovered();
    p.dl = ImGui::GetWindowDrawList();
    const float pad = ImGui::GetFontSize() * 0.3f;
    p.min = {pos.x + ImGui::CalcTextSize("0.0000").x + pad, pos.y + ImGui::GetFontSize() + pad};
    p.max = {pos.x + size.x - pad, pos.y + size.y - pad};
    if (!ImGui::IsItemVisible()) return false;
    const bool dark = ImGui::GetStyle().Colors[ImGuiCol_WindowBg].x < 0.5f;
    const auto& pal = palette(dark);
    p.dl->AddRectFilled(p.min, p.max, pal.background);
    p.dl->AddRect(p.min, p.max, pal.grid);
    p.dl->AddText({pos.x + pad, pos.y}, pal.text_dim, title);
    p.dl->PushClipRect(p.min, p.max, true);
    return true;
}

void setup_axes(Plot& p, double x0, double x1, double y0, double y1) {
    if (!std::isfinite(x0) || !std::isfinite(x1) || x1 <= x0) {
        x0 = 0;
        x1 = 1;
    }
    if (!std::isfinite(y0) || !std::isfinite(y1) || y1 <= y0) {
        y0 = 0;
        y1 = 1;
    }
    p.x0 = x0;
    p.x1 = x1;
    p.y0 = y0;
    p.y1 = y1;
}

void plot_line(Plot& p, const float* xs, const float* ys, int n, ImU32 color, float thickness) {
    bool have_prev = false;
    ImVec2 prev;
    for (int i = 0; i < n; ++i) {
        if (!std::isfinite(xs[i]) || !std::isfinite(ys[i])) {
            have_prev = false;
            continue;
        }
        const ImVec2 s = p.to_screen(xs[i], ys[i]);
        if (have_prev)
            p.dl->AddLine(prev, s, color, thickness);
        else if (n == 1 || (i + 1 < n && !std::isfinite(ys[i + 1])))
            p.dl->AddCircleFilled(s, thickness, color);
        prev = s;
        have_prev = true;
    }
}

void plot_hline(Plot& p, double y, ImU32 color, const char* label) {
    if (!std::isfinite(y)) return;
    const ImVec2 a = p.to_screen(p.x0, y), b = p.to_screen(p.x1, y);
    const int dashes = static_cast<int>(std::ceil((b.x - a.x) / 8));
    for (int i = 0; i < dashes; ++i) {
        const float x = a.x + 8.f * static_cast<float>(i);
        p.dl->AddLine({x, a.y}, {std::min(x + 4, b.x), a.y}, color, 1.f);
    }
    if (label)
        p.dl->AddText({b.x - ImGui::CalcTextSize(label).x - 2, a.y - ImGui::GetFontSize()}, color,
                      label);
}

void plot_vline(Plot& p, double x, ImU32 color) {
    if (!std::isfinite(x)) return;
    const ImVec2 a = p.to_screen(x, p.y0), b = p.to_screen(x, p.y1);
    p.dl->AddLine(a, b, color, 1.f);
}

void plot_marker(Plot& p, double x, double y, ImU32 color, float r) {
    if (!std::isfinite(x) || !std::isfinite(y)) return;
    const ImVec2 s = p.to_screen(x, y);
    p.dl->AddTriangleFilled({s.x, s.y - r}, {s.x - r, s.y + r}, {s.x + r, s.y + r}, color);
}

void end_plot(Plot& p) {
    p.dl->PopClipRect();
    if (!p.label_y_ends) return;
    char buf[64];
    const bool dark = ImGui::GetStyle().Colors[ImGuiCol_WindowBg].x < 0.5f;
    std::snprintf(buf, sizeof buf, "%.3g", p.y1);
    p.dl->AddText({p.min.x - ImGui::CalcTextSize(buf).x - 2, p.min.y - 2}, palette(dark).text_dim,
                  buf);
    std::snprintf(buf, sizeof buf, "%.3g", p.y0);
    p.dl->AddText({p.min.x - ImGui::CalcTextSize(buf).x - 2, p.max.y - ImGui::GetFontSize()},
                  palette(dark).text_dim, buf);
}

void x_ticks(Plot& p, ImU32 color, const char* format, const char* unit) {
    for (int k = 0; k <= 4; ++k) {
        const double x = p.x0 + (p.x1 - p.x0) * k / 4.0;
        char number[32], label[48];
        std::snprintf(number, sizeof number, format, x);
        std::snprintf(label, sizeof label, k == 4 ? "%s %s" : "%s", number, unit);
        const ImVec2 s = p.to_screen(x, p.y0);
        const float w = ImGui::CalcTextSize(label).x;
        const float left = k == 0 ? s.x + 2 : (k == 4 ? s.x - w - 2 : s.x - w / 2);
        p.dl->AddText({left, s.y - ImGui::GetFontSize() - 1}, color, label);
    }
}

void legend_item(const char* label, ImU32 color) {
    const float h = ImGui::GetFontSize();
    wrap_before(h + 2 + ImGui::CalcTextSize(label).x);  // legends wrap in narrow columns
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled({pos.x, pos.y + h * 0.2f},
                                              {pos.x + h * 0.8f, pos.y + h}, color);
    ImGui::Dummy({h, h});
    ImGui::SameLine(0, 2);
    ImGui::TextUnformatted(label);
    ImGui::SameLine();
}

void annotation_marker(ImDrawList* dl, ImVec2 center, int number, const std::string& text,
                       bool dark) {
    const auto& pal = palette(dark);
    const float r = ImGui::GetFontSize() * 0.55f;
    dl->AddCircleFilled(center, r, pal.background);
    dl->AddCircle(center, r, pal.accent, 0, 2.f);
    const std::string label = std::to_string(number);
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    dl->AddText({center.x - ts.x / 2, center.y - ts.y / 2}, pal.text, label.c_str());
    const ImVec2 m = ImGui::GetIO().MousePos;
    const float dx = m.x - center.x, dy = m.y - center.y;
    if (dx * dx + dy * dy <= r * r * 1.5f && ImGui::IsWindowHovered()) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 24);
        ImGui::Text("%d. %s", number, text.c_str());
        ImGui::PopTextWrapPos();
        ImGui::EndTooltip();
    }
}

}  // namespace cl::viz::plot

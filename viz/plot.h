// Small ImPlot-shaped plotting helpers over ImDrawList: begin_plot -> setup_axes -> plot_* ->
// end_plot. Non-finite values are skipped, never drawn.
#pragma once

#include <imgui.h>

#include <string>

namespace cl::viz::plot {

struct Plot {
    ImDrawList* dl = nullptr;
    ImVec2 min, max;  // plotting rectangle in screen space
    double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    bool hovered = false;
    bool label_y_ends = true;  // end_plot writes y0 and y1 beside the frame (off: own gridlines)
    ImVec2 to_screen(double x, double y) const;
    double x_at(float screen_x) const;
};

// Reserves `size` (negative width = available), draws the frame and the title. Returns false when
// clipped.
bool begin_plot(const char* title, ImVec2 size, Plot& plot);
void setup_axes(Plot& plot, double x0, double x1, double y0, double y1);
void plot_line(Plot& plot, const float* xs, const float* ys, int n, ImU32 color,
               float thickness = 1.5f);
void plot_hline(Plot& plot, double y, ImU32 color, const char* label = nullptr);
void plot_vline(Plot& plot, double x, ImU32 color);
void plot_marker(Plot& plot, double x, double y, ImU32 color, float radius = 3.f);
void end_plot(Plot& plot);
// Five x labels inside the bottom edge (`format` for the number, the last one with `unit`); the
// y axis is labelled by end_plot or the caller's gridlines.
void x_ticks(Plot& plot, ImU32 color, const char* format, const char* unit);
void legend_item(const char* label, ImU32 color);
// A lesson annotation: a numbered ring at `center`; hovering it shows `text` in a tooltip.
void annotation_marker(ImDrawList* dl, ImVec2 center, int number, const std::string& text,
                       bool dark);

}  // namespace cl::viz::plot

// The shared position axis of the timeline and the recompute map: at 1,280 positions a column is
// a few hundred pixels wide, so a token is followed across layers and steps in a zoomed window
// that every column and both panels share (ViewState::zoom_first, zoom_count).
#include <algorithm>
#include <cmath>
#include <string>

#include "viz/panels/panels.h"

namespace cl::viz {

namespace {
constexpr int32_t kFewestZoomedPositions = 16;
constexpr float kZoomStep = 1.5f;  // per wheel notch
}  // namespace

int32_t PositionAxis::at(float fraction) const {
    const auto p = first + static_cast<int32_t>(std::floor(std::clamp(fraction, 0.f, 1.f) * count));
    return std::clamp(p, first, first + count - 1);
}

PositionAxis position_axis(const ViewState& view, int32_t axis_first, int32_t axis_count) {
    PositionAxis a;
    a.first = axis_first;
    a.count = std::max(1, axis_count);
    if (view.zoom_count > 0) {
        const int32_t lo = std::max(axis_first, view.zoom_first);
        const int32_t hi = std::min(axis_first + a.count, view.zoom_first + view.zoom_count);
        if (hi - lo >= 1 && hi - lo < a.count) {
            a.first = lo;
            a.count = hi - lo;
            a.zoomed = true;
        }
    }
    a.u0 = static_cast<float>(a.first - axis_first) / std::max(1, axis_count);
    a.u1 = static_cast<float>(a.first + a.count - axis_first) / std::max(1, axis_count);
    return a;
}

std::string handle_position_zoom(ViewState& view, const PositionAxis& axis, int32_t axis_first,
                                 int32_t axis_count, float cursor_fraction) {
    if (ImGui::IsItemHovered()) {
        const ImGuiIO& io = ImGui::GetIO();
        if (ImGui::IsMouseDoubleClicked(0)) view.zoom_count = 0;
        if (io.KeyCtrl && io.MouseWheel != 0.f) {
            const int32_t under = axis.at(cursor_fraction);
            const float scale = io.MouseWheel > 0 ? 1.f / kZoomStep : kZoomStep;
            const auto count = static_cast<int32_t>(std::lround(axis.count * scale));
            if (count >= axis_count) {
                view.zoom_count = 0;
            } else {
                view.zoom_count = std::max(kFewestZoomedPositions, count);
                // Keep the position under the cursor where it is.
                view.zoom_first =
                    std::clamp(under - static_cast<int32_t>(cursor_fraction * view.zoom_count),
                               axis_first, axis_first + axis_count - view.zoom_count);
            }
        }
    }
    if (!axis.zoomed) return "";
    return "positions " + std::to_string(axis.first) + "-" +
           std::to_string(axis.first + axis.count - 1) + " of " + std::to_string(axis_first) + "-" +
           std::to_string(axis_first + axis_count - 1) + " (Ctrl+wheel zooms, double-click: all)";
}

}  // namespace cl::viz

// Colours: an Okabe-Ito based, colour-blind-safe palette with spread luminance (state is never
// told by colour alone: panels add outlines/glyphs), and perceptual colormaps for legends.
#pragma once

#include <imgui.h>

#include <cstddef>
#include <cstdint>

#include "engine/trace/trace_types.h"
#include "viz/viz_context.h"

namespace cl::viz {

struct Palette {
    ImU32 prompt, masked, decoded_earlier, decoded_now, recomputed, reused, probed, feature,
        skipped;
    ImU32 text, text_dim, background, grid, threshold, trigger, accent, bad;
};

const Palette& palette(bool dark);
ImU32 state_color(trace::TokenState s, bool dark);
ImU32 action_color(trace::RowAction a, bool dark);
// Categorical colours for series (policies in a chart), Okabe-Ito, distinct and readable on the
// theme's background: the light theme darkens the pale ones. Index k takes the k-th, cycling.
ImU32 series_color(size_t k, bool dark);
// CPU version of the shaders' colormaps (legends, tests): t in [0, 1].
ImU32 colormap_color(Colormap cmap, float t);
// Packs ImU32 (ABGR in ImGui) as RGBA8 bytes for textures.
inline uint32_t to_rgba8(ImU32 c) {
    return c;
}  // ImGui's IM_COL32 layout is already R,G,B,A in memory

}  // namespace cl::viz

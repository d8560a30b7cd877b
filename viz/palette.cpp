#include "viz/palette.h"

#include <algorithm>
#include <cmath>

namespace cl::viz {

const Palette& palette(bool dark) {
    // Okabe-Ito: orange E69F00, sky blue 56B4E9, bluish green 009E73, yellow F0E442, blue 0072B2,
    // vermillion D55E00, reddish purple CC79A7; greys for prompt/masked keep luminance apart.
    static const Palette d{
        IM_COL32(110, 110, 120, 255), IM_COL32(45, 45, 52, 255),    IM_COL32(0, 114, 178, 255),
        IM_COL32(240, 228, 66, 255),  IM_COL32(230, 159, 0, 255),   IM_COL32(60, 60, 70, 255),
        IM_COL32(86, 180, 233, 255),  IM_COL32(0, 158, 115, 255),   IM_COL32(25, 25, 30, 255),
        IM_COL32(235, 235, 240, 255), IM_COL32(150, 150, 160, 255), IM_COL32(22, 22, 28, 255),
        IM_COL32(70, 70, 80, 255),    IM_COL32(213, 94, 0, 255),    IM_COL32(204, 121, 167, 255),
        IM_COL32(86, 180, 233, 255),  IM_COL32(213, 94, 0, 255)};
    static const Palette l{
        IM_COL32(150, 150, 160, 255), IM_COL32(225, 225, 232, 255), IM_COL32(0, 114, 178, 255),
        IM_COL32(200, 170, 0, 255),   IM_COL32(230, 159, 0, 255),   IM_COL32(200, 200, 208, 255),
        IM_COL32(86, 180, 233, 255),  IM_COL32(0, 158, 115, 255),   IM_COL32(245, 245, 248, 255),
        IM_COL32(20, 20, 25, 255),    IM_COL32(100, 100, 110, 255), IM_COL32(250, 250, 252, 255),
        IM_COL32(200, 200, 210, 255), IM_COL32(213, 94, 0, 255),    IM_COL32(204, 121, 167, 255),
        IM_COL32(0, 114, 178, 255),   IM_COL32(213, 94, 0, 255)};
    return dark ? d : l;
}

ImU32 state_color(trace::TokenState s, bool dark) {
    const auto& p = palette(dark);
    switch (s) {
        case trace::TokenState::Prompt:
            return p.prompt;
        case trace::TokenState::Masked:
            return p.masked;
        case trace::TokenState::DecodedNow:
            return p.decoded_now;
        case trace::TokenState::DecodedEarlier:
            return p.decoded_earlier;
    }
    return p.masked;
}

ImU32 action_color(trace::RowAction a, bool dark) {
    const auto& p = palette(dark);
    switch (a) {
        case trace::RowAction::Recomputed:
            return p.recomputed;
        case trace::RowAction::KvReused:
            return p.reused;
        case trace::RowAction::ProbedOnly:
            return p.probed;
        case trace::RowAction::FeatureReused:
            return p.feature;
        case trace::RowAction::Skipped:
            return p.skipped;
    }
    return p.skipped;
}

ImU32 series_color(size_t k, bool dark) {
    // Sky blue, orange, bluish green, reddish purple, vermillion, yellow, blue, grey.
    static constexpr ImU32 kDark[] = {IM_COL32(86, 180, 233, 255), IM_COL32(230, 159, 0, 255),
                                      IM_COL32(0, 158, 115, 255),  IM_COL32(204, 121, 167, 255),
                                      IM_COL32(213, 94, 0, 255),   IM_COL32(240, 228, 66, 255),
                                      IM_COL32(0, 114, 178, 255),  IM_COL32(150, 150, 150, 255)};
    // On white: sky blue, orange and yellow darkened until they hold 3:1 contrast.
    static constexpr ImU32 kLight[] = {IM_COL32(0, 120, 180, 255), IM_COL32(190, 120, 0, 255),
                                       IM_COL32(0, 130, 95, 255),  IM_COL32(170, 80, 135, 255),
                                       IM_COL32(213, 94, 0, 255),  IM_COL32(150, 135, 0, 255),
                                       IM_COL32(0, 90, 150, 255),  IM_COL32(110, 110, 110, 255)};
    constexpr size_t n = sizeof kDark / sizeof kDark[0];
    return dark ? kDark[k % n] : kLight[k % n];
}

ImU32 colormap_color(Colormap cmap, float t) {
    // Piecewise-linear fits of viridis and magma at 5 stops (the shaders use the same stops).
    static const float viridis[5][3] = {{0.267f, 0.005f, 0.329f},
                                        {0.231f, 0.322f, 0.545f},
                                        {0.129f, 0.569f, 0.549f},
                                        {0.369f, 0.788f, 0.384f},
                                        {0.993f, 0.906f, 0.144f}};
    static const float magma[5][3] = {{0.001f, 0.000f, 0.014f},
                                      {0.317f, 0.071f, 0.485f},
                                      {0.716f, 0.215f, 0.475f},
                                      {0.987f, 0.535f, 0.382f},
                                      {0.987f, 0.991f, 0.750f}};
    const auto& stops = cmap == Colormap::Magma ? magma : viridis;
    if (!std::isfinite(t)) return IM_COL32(128, 128, 128, 255);
    t = std::clamp(t, 0.f, 1.f) * 4.f;
    const int i = std::min(3, static_cast<int>(t));
    const float f = t - static_cast<float>(i);
    auto ch = [&](int c) {
        return static_cast<int>(255.f * (stops[i][c] * (1 - f) + stops[i + 1][c] * f));
    };
    return IM_COL32(ch(0), ch(1), ch(2), 255);
}

}  // namespace cl::viz

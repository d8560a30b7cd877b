#include "engine/trace/attention_detail.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace cl::trace {

double attention_map_bytes(int64_t cells_per_side) {
    const double c = static_cast<double>(std::max<int64_t>(cells_per_side, 0));
    return c * c + 8 * c;
}

double smallest_attention_budget(int64_t layers, int64_t steps) {
    return static_cast<double>(std::max<int64_t>(layers, 1)) *
           static_cast<double>(std::max<int64_t>(steps, 1)) * attention_map_bytes(1);
}

std::string megabytes(double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, bytes < 10e6 ? "%.2f MB" : "%.0f MB", bytes / 1e6);
    return text;
}

int32_t attention_tile_for_budget(double budget_bytes, int64_t layers, int64_t seq_len,
                                  int64_t steps) {
    if (!(budget_bytes > 0) || !std::isfinite(budget_bytes))
        throw std::invalid_argument("the attention budget must be a positive number of bytes");
    const int64_t L = std::max<int64_t>(seq_len, 1);
    const double maps = static_cast<double>(std::max<int64_t>(layers, 1)) *
                        static_cast<double>(std::max<int64_t>(steps, 1));
    const double per_map = budget_bytes / maps;
    if (per_map < attention_map_bytes(1))
        throw std::invalid_argument("an attention budget of " + megabytes(budget_bytes) +
                                    " cannot hold one cell per map of " + std::to_string(layers) +
                                    " layers x " + std::to_string(steps) +
                                    " steps: it needs at least " +
                                    megabytes(smallest_attention_budget(layers, steps)));
    // The largest c with c^2 + 8c <= per_map, then the smallest t with ceil(L / t) <= c.
    auto c = static_cast<int64_t>(std::floor(std::sqrt(per_map + 16.0) - 4.0));
    while (c > 1 && attention_map_bytes(c) > per_map) --c;
    c = std::clamp<int64_t>(c, 1, L);
    return static_cast<int32_t>((L + c - 1) / c);
}

double attention_run_bytes(int32_t tile, int64_t layers, int64_t seq_len, int64_t steps,
                           int64_t full_layers) {
    const int64_t L = std::max<int64_t>(seq_len, 1), t = std::max<int32_t>(tile, 1);
    const int64_t pooled = std::max<int64_t>(layers - full_layers, 0);
    return static_cast<double>(std::max<int64_t>(steps, 1)) *
           (static_cast<double>(pooled) * attention_map_bytes((L + t - 1) / t) +
            static_cast<double>(std::max<int64_t>(full_layers, 0)) * attention_map_bytes(L));
}

AttentionDetail attention_detail_for(int32_t run_tile, int64_t rows, int64_t seq_len,
                                     bool full_resolution) {
    AttentionDetail d;
    if (full_resolution || run_tile <= 1) return d;
    d.key_tile = run_tile;
    const int64_t side = (std::max<int64_t>(seq_len, 1) + run_tile - 1) / run_tile;
    d.row_tile = rows <= side ? 1 : run_tile;
    return d;
}

}  // namespace cl::trace

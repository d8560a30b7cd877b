// The level of detail of a run's attention maps: the engine pools each head-mean map into tiles so
// that every map of the run fits the run's attention budget, however many layers, positions and
// steps it has (at LLaDA-8B's 32 layers, L = 1,280 and 1,024 steps the full maps are 54 GB a run).
//
// The rule, one tile size t for the run: the smallest t >= 1 with
//     steps * layers * map_bytes(ceil(L / t)) <= budget,   map_bytes(c) = c * c + 8 * c
// (levels, then each stored row's position and scale). A step that computes every row stores
// ceil(L / t) x ceil(L / t) tiles; a cached step that computes at most ceil(L / t) rows keeps those
// rows at full resolution with keys in tiles of t (never more bytes than the pooled full map).
// Layers the user asks for at full resolution (ProbeKind::FullResolution) are never pooled and
// are counted beside the budget by the memory estimate. The embedded models fit their budget at
// t = 1, so their maps are exactly what they always were.
#pragma once

#include <cstdint>
#include <string>

namespace cl::trace {

// The default budget of one run's head-mean attention maps in memory (and, before compression,
// in its session): 256 MB. The embedded model's runs (6 layers) fit it at full resolution up to
// L = 404 at 256 steps; at 32 layers and 1,024 steps it is 7.8 KB a map (80 x 80 tiles of 16
// positions at L = 1,280); at 32 layers, L = 512 and 256 steps, tiles of 3.
constexpr double kDefaultAttentionBudgetBytes = 256e6;

struct AttentionDetail {
    int32_t key_tile = 1;  // keys per stored column
    int32_t row_tile = 1;  // query positions per stored row
    bool full_resolution() const { return key_tile == 1 && row_tile == 1; }
};

// Bytes one stored map of c x c cells takes (levels, row positions and scales).
double attention_map_bytes(int64_t cells_per_side);

// The run's tile size (see the rule above). Throws std::invalid_argument naming the budget when
// even one cell per map (t = L) does not fit, or when the budget is not a positive number.
int32_t attention_tile_for_budget(double budget_bytes, int64_t layers, int64_t seq_len,
                                  int64_t steps);

// The smallest budget that attention_tile_for_budget accepts for this shape (t = L).
double smallest_attention_budget(int64_t layers, int64_t steps);

// The detail of one layer's map at a step that computes `rows` of `seq_len` rows.
AttentionDetail attention_detail_for(int32_t run_tile, int64_t rows, int64_t seq_len,
                                     bool full_resolution);

// The bytes a run's head-mean maps take at tile t, `full_layers` of its layers at full resolution.
double attention_run_bytes(int32_t tile, int64_t layers, int64_t seq_len, int64_t steps,
                           int64_t full_layers = 0);

// "128 MB" style text for messages.
std::string megabytes(double bytes);

}  // namespace cl::trace

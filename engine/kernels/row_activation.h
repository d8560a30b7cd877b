// The gated MLP's activation over float rows in one loop, for the CPU forward in float32:
// silu(gate) * up, with gate and up side by side in the stacked projection's output. In LibTorch
// 1.13 ops it is silu on a strided view (its slow path) and a mul, each with a fixed cost that a
// cached step's few rows do not shrink.
// No torch here: blocks.cpp hands it the tensors' memory, the test holds it against float64.
#pragma once

#include <cstdint>

namespace cl::detail {

// out[r][f] = silu(y[r][f]) * y[r][F + f] for rows x F, y's rows row_stride floats apart (>= 2F),
// out contiguous (rows, F). silu(g) = g * sigmoid(g), sigmoid from exp(-|g|) (no overflow).
void silu_mul_rows(const float* y, int64_t row_stride, int64_t rows, int64_t F, float* out);

}  // namespace cl::detail

// Head-mean + 8-bit quantisation of attention maps for traces, on the device: the trace then copies
// (R, L) bytes off the GPU instead of (H, R, L) floats. CPU reference: trace::AttentionMap::
// set_head_mean, whose float operations (head sum in head order, positive row max, 255 / max
// scale, round half up) this repeats one for one, so the two agree exactly.
#pragma once

#include <cstdint>

#include "engine/cuda/stream.h"

namespace cl::cuda {

// probs: (heads, rows, cols) float32 row-major on the device.
// levels: (rows, cols) uint8 on the device: round(clamp(sum_h probs * 255 / max, 0, 255)).
// row_scale: (rows) float32 on the device: the row's largest head-mean value (max / heads).
void head_mean_quantize(const float* probs, int32_t heads, int32_t rows, int32_t cols,
                        uint8_t* levels, float* row_scale, Stream stream);

}  // namespace cl::cuda

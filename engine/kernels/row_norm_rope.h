// RMSNorm and rotary embeddings over float rows in single loops, for the CPU forward in float32.
// In LibTorch ops each is 8-10 operator calls (casts, pow, mean, rsqrt, muls; narrows, a negation,
// a cat, muls, an add), each with a fixed cost that does not shrink with a cached step's few rows.
// No torch here: blocks.cpp hands them the tensors' memory, tests hold them against LibTorch's ops.
#pragma once

#include <cstdint>

namespace cl::detail {

// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * weight, for rows x D floats (x and out contiguous,
// may be the same), in the order LibTorch's ops round in.
void rms_norm_rows(const float* x, const float* weight, float* out, int64_t rows, int64_t D,
                   float eps);

// Rows of a projection's output, heads side by side: x row r starts at x + r * row_stride and
// holds n heads of Dh floats. Each head rotated NeoX style (halves) with cos, sin (R, Dh) of its
// row's position, written head-major: out (n, R, Dh) contiguous, the layout attention multiplies.
struct RopeRows {
    const float* x = nullptr;
    int64_t row_stride = 0;
    const float* cos = nullptr;
    const float* sin = nullptr;
    int64_t rows = 0, heads = 0, head_dim = 0;
};
void rope_rows(const RopeRows& in, float* out);

}  // namespace cl::detail

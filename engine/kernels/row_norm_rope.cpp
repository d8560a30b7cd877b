#include "engine/kernels/row_norm_rope.h"

#include "engine/base/cpu_clones.h"

#include <cmath>

namespace cl::detail {

namespace {

constexpr int kLanes = 16;

// Sum of squares in kLanes partial sums, as LibTorch's vectorised mean adds them (the order
// matters in float32 only at the last bit). Inlined into each clone, so in its vectors.
[[gnu::always_inline]] inline float sum_of_squares(const float* x, int64_t n) {
    float lanes[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
        for (int k = 0; k < kLanes; ++k) lanes[k] += x[j + k] * x[j + k];
    float sum = 0.0F;
    for (float lane : lanes) sum += lane;
    for (; j < n; ++j) sum += x[j] * x[j];
    return sum;
}

}  // namespace

// Both loops clone per instruction set (AVX2: 8-float vectors; in a fast-prefix cached step on an
// AVX2 EPYC their share of the time fell from 2.6% to 1.9%, perf: a head's 16-float halves are
// short loops); the unit builds with -ffp-contract=off, so no product is fused into an add and
// every clone rounds as LibTorch's ops do.
CL_CPU_CLONES void rms_norm_rows(const float* x, const float* weight, float* out, int64_t rows,
                                 int64_t D, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = x + r * D;
        float* o = out + r * D;
        const float inv = 1.0F / std::sqrt(sum_of_squares(row, D) / static_cast<float>(D) + eps);
        for (int64_t j = 0; j < D; ++j) o[j] = (row[j] * inv) * weight[j];
    }
}

CL_CPU_CLONES void rope_rows(const RopeRows& in, float* out) {
    const int64_t half = in.head_dim / 2, Dh = in.head_dim;
    for (int64_t r = 0; r < in.rows; ++r) {
        const float* c = in.cos + r * Dh;
        const float* s = in.sin + r * Dh;
        for (int64_t h = 0; h < in.heads; ++h) {
            const float* x = in.x + r * in.row_stride + h * Dh;
            float* o = out + (h * in.rows + r) * Dh;
            // x * cos + rotate_half(x) * sin with rotate_half(x) = [-x2, x1]: each product rounded
            // on its own, as LibTorch's ops do.
            for (int64_t i = 0; i < half; ++i) {
                const float a = x[i] * c[i], b = -x[i + half] * s[i];
                o[i] = a + b;
            }
            for (int64_t i = half; i < Dh; ++i) {
                const float a = x[i] * c[i], b = x[i - half] * s[i];
                o[i] = a + b;
            }
        }
    }
}

}  // namespace cl::detail

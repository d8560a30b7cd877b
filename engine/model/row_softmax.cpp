#include "engine/model/row_softmax.h"

#include "engine/model/row_exp.h"

#include <cstdint>

// One copy of each row loop per instruction set, picked when the library loads (GCC and Clang on
// x86-64; the plain copy elsewhere). Without it the build targets baseline x86-64 (SSE2) and the
// exp loop runs 4 lanes wide where the CPU has 16.
#if defined(__x86_64__) && defined(__GNUC__)
#define CL_ROW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CL_ROW_CLONES
#endif

namespace cl::detail {

namespace {

constexpr int kLanes = 16;  // one AVX-512 register of floats
using row_exp::exp_of_nonpositive;

// kLanes running sums, so that the compiler can keep them in one vector register (a single float
// accumulator would serialise the loop: floats are not reassociated without -ffast-math).
// The maxima are a vector type of their own: GCC left the same loop over an array of kLanes
// maxima scalar (a compare and a blend per float, a quarter of the softmax's time).
using MaxLanes = float __attribute__((vector_size(kLanes * sizeof(float))));

CL_ROW_CLONES float row_max(const float* x, int64_t n) {
    float m = x[0];
    int64_t j = 0;
    if (n >= kLanes) {
        MaxLanes lanes;
        __builtin_memcpy(&lanes, x, sizeof lanes);  // unaligned load
        for (j = kLanes; j + kLanes <= n; j += kLanes) {
            MaxLanes next;
            __builtin_memcpy(&next, x + j, sizeof next);
            lanes = lanes >= next ? lanes : next;
        }
        for (int k = 0; k < kLanes; ++k) m = m >= lanes[k] ? m : lanes[k];
    }
    for (; j < n; ++j) m = m >= x[j] ? m : x[j];
    return m;
}

// x[j] = exp(x[j] - max); returns their sum.
CL_ROW_CLONES float exp_in_place(float* x, int64_t n, float max) {
    for (int64_t j = 0; j < n; ++j) x[j] = exp_of_nonpositive(x[j] - max);
    float lanes[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
        for (int k = 0; k < kLanes; ++k) lanes[k] += x[j + k];
    float sum = 0.0F;
    for (float lane : lanes) sum += lane;
    for (; j < n; ++j) sum += x[j];
    return sum;
}

CL_ROW_CLONES void scale_in_place(float* x, int64_t n, float factor) {
    for (int64_t j = 0; j < n; ++j) x[j] *= factor;
}

}  // namespace

float softmax_exp(float x) {
    return exp_of_nonpositive(x);
}

void softmax_rows(float* data, int64_t rows, int64_t cols, int64_t stride) {
    if (cols <= 0) return;
    for (int64_t r = 0; r < rows; ++r) {
        float* row = data + r * stride;
        const float sum = exp_in_place(row, cols, row_max(row, cols));
        scale_in_place(row, cols, 1.0F / sum);
    }
}

}  // namespace cl::detail

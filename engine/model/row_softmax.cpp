#include "engine/model/row_softmax.h"

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

constexpr float kLog2e = 1.44269504088896341F;
// ln 2 split so that n * kLn2Hi is exact for |n| < 2^9 (Cody-Waite reduction).
constexpr float kLn2Hi = 0.693359375F;
constexpr float kLn2Lo = -2.12194440e-4F;
constexpr float kMinArg = -87.0F;  // 2^-125.5: still a normal float
constexpr int kLanes = 16;         // one AVX-512 register of floats

// exp(x) for x <= 0: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by Cephes' degree-6 polynomial,
// 2^n built in the exponent bits. Branch-free, so a loop over it vectorises. A NaN or a value
// below kMinArg is taken as kMinArg (the int conversion of a NaN would be undefined).
// Always inlined: GCC does not inline a plain function into the target clones otherwise.
[[gnu::always_inline]] inline float exp_of_nonpositive(float x) {
    x = x >= kMinArg ? x : kMinArg;
    x = x <= 0.0F ? x : 0.0F;
    // n = round(x / ln2): for a non-positive argument truncating (y - 1/2) rounds to nearest, and a
    // truncating conversion vectorises where floor() would be a call.
    const auto n_int = static_cast<int32_t>(x * kLog2e - 0.5F);
    const auto n = static_cast<float>(n_int);
    const float r = (x - n * kLn2Hi) - n * kLn2Lo;
    float p = 1.9875691500e-4F;
    p = p * r + 1.3981999507e-3F;
    p = p * r + 8.3334519073e-3F;
    p = p * r + 4.1665795894e-2F;
    p = p * r + 1.6666665459e-1F;
    p = p * r + 5.0000001201e-1F;
    p = p * r * r + r + 1.0F;
    const auto exponent = static_cast<uint32_t>(n_int + 127) << 23U;
    // A builtin, not std::bit_cast: that is a function the clones would call.
    return p * __builtin_bit_cast(float, exponent);
}

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

// The softmax of the CPU attention's score rows, in place, in one tight loop per row: the row's
// max, exp(x - max) with a polynomial exp that the compiler vectorises (AVX-512 or AVX2
// where the CPU has them, chosen at load time), the sum, the scaling by its reciprocal.
// Under LibTorch 1.13's softmax a 1024-token forward spent 21 ms of about 120 (profiler, one
// thread; the attention products 50), most of it in its one-ulp exp; PyTorch 2's fused CPU
// attention uses a cheaper exp too. No torch here: plain floats, so the test can hold it against
// std::exp in double.
#pragma once

#include <cstdint>

namespace cl::detail {

// exp(x) for x in [-87, 0] (what a softmax feeds it; below -87 it returns about 1.6e-38 instead of
// a denormal or 0), relative error below 1e-7 (8.3e-8 measured; libm's expf 6.0e-8): Cephes' expf
// polynomial on the reduced argument.
float softmax_exp(float x);

// rows x cols floats, row-major with row stride `stride` (>= cols): each row becomes its softmax.
void softmax_rows(float* data, int64_t rows, int64_t cols, int64_t stride);

}  // namespace cl::detail

// The head mean of one layer's attention probabilities, d2Cache's rollout's A_l (its rows), as
// Elastic-Cache's drift test reads it too (engine/cuda/elastic_drift.h): each probability (float32)
// summed over the heads in head order in float32 from the first head's value, then divided by the
// head count (times its reciprocal where that is a power of two: exact, so the same bits). Float32,
// not float64: the rollout widens each value as it reads it, and float64 sums would double the
// bytes written for every computed row and read back.
// Two ways to the same bits: from the (H, R, L) probabilities (head_mean_rows, the definition), or
// from the scores the CPU attention leaves in its scratch (row_attention.h, column_head_mean),
// which never writes the probabilities. No torch here: blocks.cpp hands it the tensors' memory.
#pragma once

#include <cstdint>

namespace cl::detail {

// p (H, R, L) float32 -> rows [r0, r1) of m (R, L) float32, the head mean.
void head_mean_rows(const float* p, int64_t H, int64_t R, int64_t L, int64_t r0, int64_t r1,
                    float* m);

// A head mean's division of a sum (an S, double or float, or a vector of them) by the head count:
// times the reciprocal where the count is a power of two (exact, so the same bits as the division;
// the divisions were half of the head mean's time with 4 heads), else a division.
template <class T, class S = double>
inline T divided_by_heads(T sum, int64_t heads) {
    const auto h = static_cast<S>(heads);
    return (heads & (heads - 1)) == 0 ? sum * (S{1} / h) : sum / h;
}

}  // namespace cl::detail

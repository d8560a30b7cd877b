#include "engine/kernels/row_head_mean.h"

#include "engine/base/cpu_clones.h"

namespace cl::detail {
namespace {

// One output row while it sits in L1: the first head's row, the others added in head order, then
// the division (divided_by_heads). Cloned per instruction set: with SSE2's narrow vectors the
// divisions alone would be a visible part of a d2cache step.
CL_CPU_CLONES void head_mean_row(const float* __restrict p, int64_t H, int64_t R, int64_t L,
                                 int64_t r, float* __restrict out) {
    const float* __restrict first = p + r * L;
    for (int64_t j = 0; j < L; ++j) out[j] = first[j];
    for (int64_t h = 1; h < H; ++h) {
        const float* __restrict head = p + (h * R + r) * L;
        for (int64_t j = 0; j < L; ++j) out[j] += head[j];
    }
    for (int64_t j = 0; j < L; ++j) out[j] = divided_by_heads<float, float>(out[j], H);
}

}  // namespace

void head_mean_rows(const float* p, int64_t H, int64_t R, int64_t L, int64_t r0, int64_t r1,
                    float* m) {
    for (int64_t r = r0; r < r1; ++r) head_mean_row(p, H, R, L, r, m + r * L);
}

}  // namespace cl::detail

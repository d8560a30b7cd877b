#include "engine/model/row_gemm.h"

#include <algorithm>

// One copy per instruction set, picked when the library loads (as in row_softmax.cpp): the
// 16-float vector type below is one AVX-512 register, two AVX2 ones, four SSE2 ones.
#if defined(__x86_64__) && defined(__GNUC__)
#define CL_GEMM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CL_GEMM_CLONES
#endif

namespace cl::detail {

namespace {

constexpr int kLanes = 16;
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
constexpr int kTileRows = 6;     // 6 x 2 accumulators + 2 of wt + 1 of x: 15 of AVX-512's 32
constexpr int64_t kBlockK = 64;  // the sums restart every kBlockK values of k (precision)
static_assert(kFewRowsTileColumns == 2 * kLanes);

[[gnu::always_inline]] inline Lanes load(const float* p) {
    Lanes v;
    __builtin_memcpy(&v, p, sizeof v);  // unaligned
    return v;
}

[[gnu::always_inline]] inline void store(float* p, Lanes v) {
    __builtin_memcpy(p, &v, sizeof v);
}

// y[0:MR, 0:32] (=, or += after the first block of k) x[0:MR, k0:k1] @ wt[k0:k1, 0:32].
template <int MR>
[[gnu::always_inline]] inline void tile_block(const FewRowsProduct& p, const float* x,
                                              const float* wt, float* y, int64_t k0, int64_t k1) {
    Lanes acc[MR][2] = {};
    for (int64_t k = k0; k < k1; ++k) {
        const Lanes w0 = load(wt + k * p.ldw), w1 = load(wt + k * p.ldw + kLanes);
#pragma GCC unroll 8
        for (int m = 0; m < MR; ++m) {
            const float xm = x[m * p.ldx + k];
            acc[m][0] += xm * w0;
            acc[m][1] += xm * w1;
        }
    }
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
        float* row = y + m * p.ldy;
        if (k0 > 0) {
            acc[m][0] += load(row);
            acc[m][1] += load(row + kLanes);
        }
        store(row, acc[m][0]);
        store(row + kLanes, acc[m][1]);
    }
}

template <int MR>
[[gnu::always_inline]] inline void tile(const FewRowsProduct& p, int64_t m0, int64_t c0) {
    const float* x = p.x + m0 * p.ldx;
    float* y = p.y + m0 * p.ldy + c0;
    for (int64_t k0 = 0; k0 < p.inner; k0 += kBlockK)
        tile_block<MR>(p, x, p.wt + c0, y, k0, std::min(p.inner, k0 + kBlockK));
}

// Columns past the last whole tile (N not a multiple of 32), one at a time, summed the same way.
void tail_columns(const FewRowsProduct& p, int64_t c0, int64_t c1) {
    for (int64_t m = 0; m < p.rows; ++m)
        for (int64_t c = c0; c < c1; ++c) {
            float total = 0.0F;
            for (int64_t k0 = 0; k0 < p.inner; k0 += kBlockK) {
                float block = 0.0F;
                for (int64_t k = k0; k < std::min(p.inner, k0 + kBlockK); ++k)
                    block += p.x[m * p.ldx + k] * p.wt[k * p.ldw + c];
                total += block;
            }
            p.y[m * p.ldy + c] = total;
        }
}

}  // namespace

CL_GEMM_CLONES void few_rows_product(const FewRowsProduct& p, int64_t c0, int64_t c1) {
    int64_t c = c0;
    for (; c + kFewRowsTileColumns <= c1; c += kFewRowsTileColumns) {
        int64_t m = 0;
        for (; m + kTileRows <= p.rows; m += kTileRows) tile<kTileRows>(p, m, c);
        switch (p.rows - m) {
            case 5:
                tile<5>(p, m, c);
                break;
            case 4:
                tile<4>(p, m, c);
                break;
            case 3:
                tile<3>(p, m, c);
                break;
            case 2:
                tile<2>(p, m, c);
                break;
            case 1:
                tile<1>(p, m, c);
                break;
            default:
                break;
        }
    }
    if (c < c1) tail_columns(p, c, c1);
}

}  // namespace cl::detail

// The products of a cached step's few rows, y = x @ wt: x (M, K) rows of activations, wt (K, N)
// the transposed weight as Model::load stores it on the CPU (column-major W, so row k of wt is
// contiguous). OpenBLAS packs wt into its panel layout at every call, amortised over only the
// step's few dozen rows; wt's rows are already what a register tile reads, so this kernel reads
// them in place: 6 rows x 2 vectors of accumulators (32 columns on AVX-512, 16 on AVX2, 8 on
// SSE2: cpu_clones.h). AVX-512's 32 registers take 12 rows (row_gemm.cpp), with the rows shared
// evenly over the tiles. The sums restart every 64 values of k and are then added to y, which
// keeps the largest error against float64 below OpenBLAS's (one running sum was about four times
// it; RowKernels.FewRowsProductEqualsTheFloat64ProductAtEveryTileEdge bounds it). At inner sizes up
// to 512 it also takes a full step's hundreds of rows (blocks.cpp; cachelens-bench-forward's
// products table measures both sides). No torch here: plain floats, so the test holds it against
// a float64 product.
#pragma once

#include <cstdint>

namespace cl::detail {

struct FewRowsProduct {
    const float* x = nullptr;   // (M, K), row stride ldx, stride ldxk along k
    const float* wt = nullptr;  // (K, N), row stride ldw
    float* y = nullptr;         // (M, N), row stride ldy; overwritten
    int64_t rows = 0;           // M
    int64_t inner = 0;          // K
    int64_t columns = 0;        // N
    int64_t ldx = 0, ldw = 0, ldy = 0;
    // 1 for rows of activations; the attention's probabilities are read transposed from the
    // (keys, queries) scores that row_attention computes (ldx 1, ldxk the scores' row stride).
    int64_t ldxk = 1;
    // 0: wt as above. Else wt holds panels of panel_columns (= few_rows_panel_columns()) columns
    // one after another, each (K, width) contiguous (width < panel_columns for the last only), so
    // that a register tile's weights are one sequential stream (pack_panels).
    int64_t panel_columns = 0;
    // y += x @ wt, each 64-value block of k's sums added to y in turn (a residual add fused into
    // the product), instead of y = x @ wt.
    bool accumulate = false;
};

// Columns per thread's share of a split product: a whole number of weight panels and of register
// tiles (2 vectors wide: 32, 16 or 8 columns) on every instruction set. The columns past the last
// whole tile go 1.5, 1 or 0.5 vectors at a time, then one at a time.
inline constexpr int64_t kFewRowsTileColumns = 32;

// Columns per weight panel: one register tile of the widest kernel this CPU runs (32 on AVX-512,
// 16 on AVX2, 8 on SSE2), so that a tile's weights are one contiguous (K, width) block; a narrower
// kernel (limit_vector_floats) reads whole tiles inside a panel. On AVX2, 32-column panels had
// each 16-column tile read half of every 128-byte row of its panel: 16-column ones ran elastic
// 3%, d2cache and fast-prefix 2%, none 0.6% faster (two generators stepped in turn, one core of
// an AVX2 EPYC, medians of 3 runs).
int64_t few_rows_panel_columns();

// wt (K, N) with row stride ldw -> out (K * N floats) in the panel layout of panel_columns =
// few_rows_panel_columns().
void pack_panels(const float* wt, int64_t K, int64_t N, int64_t ldw, float* out);

// y[:, c0:c1] of the product (c0 a multiple of kFewRowsTileColumns; c1 <= N).
void few_rows_product(const FewRowsProduct& p, int64_t c0, int64_t c1);

}  // namespace cl::detail

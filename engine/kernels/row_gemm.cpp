#include "engine/kernels/row_gemm.h"

#include "engine/base/cpu_clones.h"
#include "engine/kernels/row_lanes.h"

#include <algorithm>

namespace cl::detail {

namespace {

using row_lanes::Floats;
using row_lanes::load;
using row_lanes::store;
// Rows of a register tile at N floats a vector. 6 x 2 vectors of sums + 2 of wt + 1 of x: 15
// registers, which fits SSE2's and AVX2's 16 (vectors of 4 and 8 floats); 12 x 2 + 3 of AVX-512's
// 32 (16 floats). The 24 products of the embedded model's 6 layers, weights from L3, one core of
// the AVX-512 Xeon, us with 6 / 12 rows (two alternated runs): R 8 392, 317 / 233, 219; R 16 590,
// 430 / 392, 370; R 32 781, 773 / 684, 655; the full 415 rows level within the noise.
template <int N>
constexpr int kTileRows = N == 16 ? 12 : 6;
constexpr int64_t kBlockK = 64;  // the sums restart every kBlockK values of k (precision)
static_assert(kFewRowsTileColumns == 2 * 16);  // a tile of two AVX-512 vectors per row

// Where row k of the columns from c lies: wt + k * ldw. In a panel layout the columns' panel.
struct Strip {
    const float* wt;
    int64_t ldw;
};

[[gnu::always_inline]] inline Strip strip_at(const FewRowsProduct& p, int64_t c) {
    if (p.panel_columns == 0) return {p.wt + c, p.ldw};
    const int64_t first = c - c % p.panel_columns;  // the panel's first column
    return {p.wt + first * p.inner + (c - first), std::min(p.panel_columns, p.columns - first)};
}

// Whether the tiles spell their fused multiply-adds out. The AVX2 and AVX-512 kernels give the
// same bits only if every `sum += x * w` of their tiles is one fused multiply-add, as the tail
// columns' explicit fmaf is. GCC 12 contracts every one (0 of 31,200 product shapes of 1-100
// columns differ between the widths); GCC 13 does not (3,610 of them differed on the lent GPU
// machine's Xeon, 0 spelled out, at the same speed). Spelled out on GCC 12 the scores tile lost a
// register and the full forward ran 3-5% slower on one core, so GCC 12 (and Clang, which contracts
// within a statement) keeps the plain expression.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 13
constexpr bool kSpelledOutFma = true;
#else
constexpr bool kSpelledOutFma = false;
#endif

// sum + x * w: one rounding per lane in the AVX2 and AVX-512 clones (a fused multiply-add; the
// per-lane fmaf calls become one vector FMA), a product then a sum on SSE2 (no FMA). V: a float or
// a Floats<n>.
template <int N, class V>
[[gnu::always_inline]] inline V multiply_add(V x, V w, V sum) {
    if constexpr (N < 8) {
        return sum + x * w;
    } else if constexpr (sizeof(V) == sizeof(float)) {
        return __builtin_fmaf(x, w, sum);
    } else {
        V out;
        for (int l = 0; l < row_lanes::lanes_of<V>; ++l)
            out[l] = __builtin_fmaf(x[l], w[l], sum[l]);
        return out;
    }
}

// Every lane of V = x.
template <class V>
[[gnu::always_inline]] inline V broadcast(float x) {
    V v;
    for (int l = 0; l < row_lanes::lanes_of<V>; ++l) v[l] = x;
    return v;
}

// The y columns of a tile: NV vectors of N floats, then NH of N / 2 (NV + NH <= 2, the half one
// only in a tile of 1.5 or 0.5 vectors; or NV = 3 in a tile of 4 rows, AVX2's last 24 columns). One
// x value broadcast serves every vector of its row, and the broadcasts, not the FMAs, bound a tile
// of a single vector: on a 594 x 32 @ 32 x 24 product (a head's scores for 22 query rows, AVX-512)
// a 16 + 8 pass took no longer than 16 + 16. y[0:MR, tile] (=, or += after the first block of k or
// with p.accumulate) x[0:MR, k0:k1] @ wt[k0:k1, tile]. UnitK: x's values of one row are adjacent
// (ldxk == 1), known at compile time.
template <int N, int MR, int NV, int NH, bool UnitK, bool Ahead>
[[gnu::always_inline]] inline void tile_block(const FewRowsProduct& p, const float* x, Strip wt,
                                              Strip ahead, float* y, int64_t k0, int64_t k1) {
    static_assert((NV + NH <= 2 && NH <= 1) || (NV == 3 && NH == 0 && MR <= 4));
    using V = Floats<N>;
    using Half = Floats<N / 2>;
    const int64_t ldxk = UnitK ? 1 : p.ldxk;
    constexpr int64_t half_at = NV * N;  // the half vector's first column
    V acc[MR][NV > 0 ? NV : 1] = {};
    Half half[MR] = {};
    for (int64_t k = k0; k < k1; ++k) {
        const float* wk = wt.wt + k * wt.ldw;
        if constexpr (Ahead) {
            // The next column tile's row k: 2N floats, one 64-byte line or two (AVX-512).
            constexpr int kLineFloats = 16;
            const float* next = ahead.wt + k * ahead.ldw;
            __builtin_prefetch(next);
            if constexpr (2 * N > kLineFloats) __builtin_prefetch(next + kLineFloats);
        }
        V w[NV > 0 ? NV : 1];
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) w[v] = load<V>(wk + v * N);
        Half wh{};
        if constexpr (NH > 0) wh = load<Half>(wk + half_at);
#pragma GCC unroll 12
        for (int m = 0; m < MR; ++m) {
            const float xm = x[m * p.ldx + k * ldxk];
            if constexpr (kSpelledOutFma) {
#pragma GCC unroll 3
                for (int v = 0; v < NV; ++v)
                    acc[m][v] = multiply_add<N>(broadcast<V>(xm), w[v], acc[m][v]);
                if constexpr (NH > 0) half[m] = multiply_add<N>(broadcast<Half>(xm), wh, half[m]);
            } else {
#pragma GCC unroll 3
                for (int v = 0; v < NV; ++v) acc[m][v] += xm * w[v];
                if constexpr (NH > 0) half[m] += xm * wh;
            }
        }
    }
#pragma GCC unroll 12
    for (int m = 0; m < MR; ++m) {
        float* row = y + m * p.ldy;
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) {
            if (k0 > 0 || p.accumulate) acc[m][v] += load<V>(row + v * N);
            store(row + v * N, acc[m][v]);
        }
        if constexpr (NH > 0) {
            if (k0 > 0 || p.accumulate) half[m] += load<Half>(row + half_at);
            store(row + half_at, half[m]);
        }
    }
}

template <int N, int MR, int NV, int NH, bool UnitK, bool Ahead>
[[gnu::always_inline]] inline void tile(const FewRowsProduct& p, int64_t m0, int64_t c0,
                                        Strip ahead) {
    const float* x = p.x + m0 * p.ldx;
    float* y = p.y + m0 * p.ldy + c0;
    const Strip wt = strip_at(p, c0);
    for (int64_t k0 = 0; k0 < p.inner; k0 += kBlockK)
        tile_block<N, MR, NV, NH, UnitK, Ahead>(p, x, wt, ahead, y, k0,
                                                std::min(p.inner, k0 + kBlockK));
}

// One tile of `rows` (1 to MR) rows from row m.
template <int N, int MR, int NV, int NH, bool UnitK, bool Ahead>
[[gnu::always_inline]] inline void tile_of(const FewRowsProduct& p, int64_t m, int64_t c,
                                           int64_t rows, Strip ahead) {
    if constexpr (MR > 0) {
        if (rows == MR) {
            tile<N, MR, NV, NH, UnitK, Ahead>(p, m, c, ahead);
            return;
        }
        tile_of<N, MR - 1, NV, NH, UnitK, Ahead>(p, m, c, rows, ahead);
    }
}

// Every row of the tile's columns from c, in the fewest tiles of at most kTileRows<N> rows, as
// even as they go: 32 rows on AVX-512 are 10 + 11 + 11, not 12 + 12 + 8 (or 6 x 5 + 2, whose
// tile of 2 rows is bound by its FMAs' latency and costs most of a full tile). The first tile's
// prefetching choice stays inside the loop: moved to a function of its own, the same code ran
// 1-7% slower on products of 415-1024 rows with GCC 12 (both versions in one binary, alternated).
template <int N, int NV, int NH, bool UnitK, int Rows = kTileRows<N>>
[[gnu::always_inline]] inline void column_tile(const FewRowsProduct& p, int64_t c) {
    const int64_t tiles = (p.rows + Rows - 1) / Rows;
    int64_t m = 0;
    for (int64_t t = 0; t < tiles; ++t) {
        const int64_t rows = (p.rows - m) / (tiles - t);  // the later tiles take the extra rows
        bool asked = false;
        if constexpr (NV == 2) {
            if (t == 0 && c + 4 * N <= p.columns) {
                // The first row tile asks for the next column tile's weights (a product's weights
                // come from L3: a step reads every layer's, 5 MB on the embedded model), which the
                // next tiles' FMAs then overlap. 25 products of a 6-layer step, GMAC/s on one core
                // of an AVX2 EPYC, without / with: R 16 25 / 30, R 32 26 / 30, R 439 22 / 35.
                tile_of<N, Rows, NV, NH, UnitK, true>(p, m, c, rows, strip_at(p, c + 2 * N));
                asked = true;
            }
        }
        if (!asked) tile_of<N, Rows, NV, NH, UnitK, false>(p, m, c, rows, {});
        m += rows;
    }
}

// Columns past the last half-vector tile, one at a time, summed in the tiles' order and rounding.
// The same column is a tail column at one width and inside a tile at another (94 columns: 88-93 on
// AVX-512, 92-93 on AVX2): summed unfused here, 12,701 of 31,200 product shapes of 1-100 columns
// gave AVX-512 other bits than AVX2 (RowKernels.AvxWidthsGiveTheSameBits on AVX-512 CPUs).
template <int N>
[[gnu::always_inline]] inline void tail_columns(const FewRowsProduct& p, int64_t c0, int64_t c1) {
    for (int64_t m = 0; m < p.rows; ++m)
        for (int64_t c = c0; c < c1; ++c) {
            const Strip wt = strip_at(p, c);
            float& y = p.y[m * p.ldy + c];
            float total = p.accumulate ? y : 0.0F;
            for (int64_t k0 = 0; k0 < p.inner; k0 += kBlockK) {
                float block = 0.0F;
                for (int64_t k = k0; k < std::min(p.inner, k0 + kBlockK); ++k)
                    block = multiply_add<N>(p.x[m * p.ldx + k * p.ldxk], wt.wt[k * wt.ldw], block);
                total += block;
            }
            y = total;
        }
}

// Tiles of two vectors, then one and a half, one or a half, then single columns. A tile never
// crosses a panel: a panel is as wide as the widest kernel's tile, a multiple of every narrower
// tile's width, and a product's share starts at a multiple of kFewRowsTileColumns.
// On AVX2, columns that end one vector past whole tiles (the scores of a cached step's 17-24 or
// 65-72 queries) end in a tile of three vectors and 4 rows instead of one of two and one of one:
// a tile of one vector costs as much as one of two (the broadcasts and the FMAs' latency bound
// it), and the keys are read once for those columns, not twice. Scores of 451 keys x 32 for 24
// queries, one core of an AVX2 EPYC: 10.5 -> 9.0 us (scratch harness, fastest of 41). Only where
// the weights are not in panels (16 columns wide on AVX2), which such a tile would cross.
template <int N, bool UnitK>
[[gnu::always_inline]] inline void product_columns(const FewRowsProduct& p, int64_t c0,
                                                   int64_t c1) {
    int64_t c = c0;
    const bool three =
        N == 8 && p.panel_columns == 0 && c1 - c0 >= 3 * N && (c1 - c0) % (2 * N) == N;
    const int64_t pairs_end = three ? c1 - 3 * N : c1;
    for (; c + 2 * N <= pairs_end; c += 2 * N) column_tile<N, 2, 0, UnitK>(p, c);
    if (three) {
        column_tile<N, 3, 0, UnitK, 4>(p, c);
        return;
    }
    const int64_t left = c1 - c;
    if (left >= N + N / 2) {
        column_tile<N, 1, 1, UnitK>(p, c);
        c += N + N / 2;
    } else if (left >= N) {
        column_tile<N, 1, 0, UnitK>(p, c);
        c += N;
    } else if (left >= N / 2) {
        column_tile<N, 0, 1, UnitK>(p, c);
        c += N / 2;
    }
    if (c < c1) tail_columns<N>(p, c, c1);
}

struct ProductKernel {
    template <int N>
    [[gnu::always_inline]] static void run(const FewRowsProduct& p, int64_t c0, int64_t c1) {
        if (p.ldxk == 1)
            product_columns<N, true>(p, c0, c1);
        else
            product_columns<N, false>(p, c0, c1);
    }
};

}  // namespace

int64_t few_rows_panel_columns() {
    return 2 * cpu::widest_vector_floats();
}

void pack_panels(const float* wt, int64_t K, int64_t N, int64_t ldw, float* out) {
    const int64_t columns = few_rows_panel_columns();
    for (int64_t first = 0; first < N; first += columns) {
        const int64_t width = std::min(columns, N - first);
        float* panel = out + first * K;  // (K, width)
        for (int64_t k = 0; k < K; ++k) std::copy_n(wt + k * ldw + first, width, panel + k * width);
    }
}

void few_rows_product(const FewRowsProduct& p, int64_t c0, int64_t c1) {
    cpu::run_at_vector_width<ProductKernel>(p, c0, c1);
}

}  // namespace cl::detail

#include "engine/kernels/row_attention.h"

#include "engine/base/cpu_clones.h"
#include "engine/kernels/row_exp.h"
#include "engine/kernels/row_gemm.h"
#include "engine/kernels/row_head_mean.h"
#include "engine/kernels/row_lanes.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cl::detail {

namespace {

constexpr int64_t kMaxVectorFloats = 16;  // the widest kernel's N (AVX-512)
constexpr int64_t kPartialSums = 4;       // each column's exps summed in 4 interleaved partial sums
using row_lanes::Doubles;
using row_lanes::Floats;
using row_lanes::lanes_of;
using row_lanes::load;
using row_lanes::store;
using row_lanes::to_doubles;

int64_t padded(int64_t columns) {
    return (columns + kColumnPadding - 1) / kColumnPadding * kColumnPadding;
}

// The pieces of the scratch buffer for Rq query rows (padded to Rp columns) and L keys.
struct Scratch {
    float* qt;       // (Dh, Rp): the query rows as columns, zero past Rq
    float* st;       // (L, Rp): scores, then exp(score - column max)
    float* max;      // (Rp)
    float* inv_sum;  // (Rp): 1 / column sum
};

Scratch carve(float* base, int64_t rp, int64_t keys, int64_t head_dim) {
    Scratch s{};
    s.qt = base;
    s.st = s.qt + head_dim * rp;
    s.max = s.st + keys * rp;
    s.inv_sum = s.max + rp;
    return s;
}

// qt[d][i] = q_i[d] for the g heads' rows in order (i = j R + r), zero in the padding.
void transpose_queries(const ColumnAttention& a, float* qt, int64_t rp) {
    const int64_t rq = a.heads * a.rows;
    for (int64_t d = 0; d < a.head_dim; ++d) std::fill(qt + d * rp + rq, qt + (d + 1) * rp, 0.0F);
    for (int64_t j = 0; j < a.heads; ++j)
        for (int64_t r = 0; r < a.rows; ++r) {
            const float* row = a.q + j * a.q_head_stride + r * a.q_row_stride;
            const int64_t i = j * a.rows + r;
            for (int64_t d = 0; d < a.head_dim; ++d) qt[d * rp + i] = row[d];
        }
}

// Each column of st (L, Rp) down its rows: max, then exp((score - max) scale) in place, then
// 1 / sum. A vector of columns at a time with its running values in registers: four interleaved
// maxima and four interleaved partial sums (key j into sum j % 4), so that neither waits on the
// previous key's. Before, the exp went along each key's row with the sums in memory, a load and a
// store per vector, and the maximum was one chain of dependent blends (together 10-12% of an
// elastic or d2cache step's time, perf).
// The vector code sits in always-inlined templates, as in row_gemm.cpp: Clang refuses a 64-byte
// vector passed or returned directly in the body of a clone built without AVX-512 (its ABI would
// differ), and checks a template's calls only where it is instantiated, inlined.
// V: Floats<N> or Floats<N / 2>, the columns of one vector.
template <class V>
[[gnu::always_inline]] inline V lane_max(V a, V b) {
    return a >= b ? a : b;
}

template <class V>
[[gnu::always_inline]] inline V column_max(const float* st, int64_t keys, int64_t rp) {
    V m[kPartialSums];
    for (auto& v : m) v = load<V>(st);
    int64_t j = 1;
    for (; j + kPartialSums <= keys; j += kPartialSums)
        for (int64_t u = 0; u < kPartialSums; ++u)
            m[u] = lane_max(m[u], load<V>(st + (j + u) * rp));
    for (; j < keys; ++j) m[0] = lane_max(m[0], load<V>(st + j * rp));
    return lane_max(lane_max(m[0], m[1]), lane_max(m[2], m[3]));
}

// exp((x - max) scale) lane by lane: row_exp's exp, which the compiler vectorises over the lanes.
template <class V>
[[gnu::always_inline]] inline V exp_lanes(V x, V max, float scale) {
    V e;
    for (int l = 0; l < lanes_of<V>; ++l)
        e[l] = row_exp::exp_of_nonpositive((x[l] - max[l]) * scale);
    return e;
}

// One key row's vector of columns: its exps, in place and returned.
template <class V>
[[gnu::always_inline]] inline V exp_in_place(float* row, V max, float scale) {
    const V e = exp_lanes(load<V>(row), max, scale);
    store(row, e);
    return e;
}

// Keys j .. keys - 1, past the last whole round of kPartialSums: their exps in place, key j's into
// partial sum j % kPartialSums.
template <class V>
[[gnu::always_inline]] inline void exp_last_keys(float* st, int64_t j, int64_t keys, int64_t rp,
                                                 V max, float scale, V (&sum)[kPartialSums]) {
    for (; j < keys; ++j) sum[j % kPartialSums] += exp_in_place(st + j * rp, max, scale);
}

// The partial sums' total, in the one order every column's is taken.
template <class V>
[[gnu::always_inline]] inline V total_of(const V (&sum)[kPartialSums]) {
    return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

// The column vector from c: st's exps in place; returns the sum's four partial sums' total.
template <class V>
[[gnu::always_inline]] inline V exp_column(float* st, int64_t keys, int64_t rp, V max,
                                           float scale) {
    V sum[kPartialSums] = {};
    int64_t j = 0;
    for (; j + kPartialSums <= keys; j += kPartialSums)
        for (int64_t u = 0; u < kPartialSums; ++u)
            sum[u] += exp_in_place(st + (j + u) * rp, max, scale);
    exp_last_keys(st, j, keys, rp, max, scale, sum);
    return total_of(sum);
}

// The column vector from c: its max, exps and 1 / sum.
template <class V>
[[gnu::always_inline]] inline void softmax_columns(const Scratch& s, int64_t c, int64_t keys,
                                                   int64_t rp, float scale) {
    const V max = column_max<V>(s.st + c, keys, rp);
    store(s.max + c, max);
    store(s.inv_sum + c, 1.0F / exp_column(s.st + c, keys, rp, max, scale));
}

// Two half vectors as one whole: a's lanes, then b's. I: 0 .. N - 1.
template <class H, int... I>
[[gnu::always_inline]] inline auto joined(H a, H b, std::integer_sequence<int, I...> /*lanes*/) {
    return __builtin_shufflevector(a, b, I...);
}

// The half of v from lane From. I: 0 .. N / 2 - 1.
template <int From, class V, int... I>
[[gnu::always_inline]] inline auto half_from(V v, std::integer_sequence<int, I...> /*lanes*/) {
    return __builtin_shufflevector(v, v, (From + I)...);
}

// The last columns from c when they are half a vector (on AVX-512, 1-8 or 17-24 query columns,
// such as a cached Elastic-Cache step's 22): softmax_columns<Floats<N / 2>>, with the exps of key
// rows j and j + 1 in one whole vector, since a half vector's exp costs a whole one's instructions.
// Each lane still adds its column's exps into partial sum j % 4 in key order, so the bits are
// softmax_columns' (`Attention.EachQueryRowIsTheSameBitsWhateverRowsShareItsCall`). One head of 22
// rows over 415 keys, in cache, AVX-512 (p10 of 20,000 calls, old and new library in turn, three
// rounds): the softmax and the rest of the attention past its two products 5.1-5.2 -> 4.4-4.7 us of
// the attention's 16.6-17.4.
template <int N>
[[gnu::always_inline]] inline void softmax_half_columns(const Scratch& s, int64_t c, int64_t keys,
                                                        int64_t rp, float scale) {
    static_assert(kPartialSums == 4);  // two pairs of key rows per round
    using H = Floats<N / 2>;
    constexpr auto whole = std::make_integer_sequence<int, N>{};
    constexpr auto half = std::make_integer_sequence<int, N / 2>{};
    const H max = column_max<H>(s.st + c, keys, rp);
    store(s.max + c, max);
    const auto max_twice = joined(max, max, whole);
    Floats<N> pairs[2] = {};  // lanes: partial sums 0 then 1, 2 then 3
    int64_t j = 0;
    for (; j + kPartialSums <= keys; j += kPartialSums)
        for (int64_t u = 0; u < 2; ++u) {
            float* first = s.st + (j + 2 * u) * rp + c;
            float* second = first + rp;
            const auto e =
                exp_lanes(joined(load<H>(first), load<H>(second), whole), max_twice, scale);
            store(first, half_from<0>(e, half));
            store(second, half_from<N / 2>(e, half));
            pairs[u] += e;
        }
    H sum[kPartialSums] = {half_from<0>(pairs[0], half), half_from<N / 2>(pairs[0], half),
                           half_from<0>(pairs[1], half), half_from<N / 2>(pairs[1], half)};
    exp_last_keys(s.st + c, j, keys, rp, max, scale, sum);
    store(s.inv_sum + c, 1.0F / total_of(sum));
}

struct SoftmaxStatsKernel {
    template <int N>
    [[gnu::always_inline]] static void run(const Scratch& s, int64_t keys, int64_t rp,
                                           float scale) {
        int64_t c = 0;
        for (; c + N <= rp; c += N) softmax_columns<Floats<N>>(s, c, keys, rp, scale);
        // rp is a multiple of 8, so what is left is half a vector at most (AVX-512 only).
        if (c < rp) softmax_half_columns<N>(s, c, keys, rp, scale);
    }
};

void column_softmax_stats(const Scratch& s, int64_t keys, int64_t rp, float scale) {
    cpu::run_at_vector_width<SoftmaxStatsKernel>(s, keys, rp, scale);
}

// One level of an N x N transpose held in N vectors of N lanes (floats or doubles): rows r and
// r + S (r without bit S) swap their off-diagonal S x S blocks, which exchanges bit S of the row
// and the column index. After the levels N / 2, ..., 2, 1 row i holds column i. C: 0 .. N - 1,
// the lanes.
template <int S, class V, int N, int... C>
[[gnu::always_inline]] inline void swap_blocks(V (&m)[N],
                                               std::integer_sequence<int, C...> /*lanes*/) {
    for (int r = 0; r < N; ++r) {
        if ((r & S) != 0) continue;
        const V a = m[r], b = m[r + S];
        m[r] = __builtin_shufflevector(a, b, ((C & S) == 0 ? C : N + C - S)...);
        m[r + S] = __builtin_shufflevector(a, b, ((C & S) == 0 ? C + S : N + C)...);
    }
}

template <int S, class V, int N>
[[gnu::always_inline]] inline void transpose_levels(V (&m)[N]) {
    swap_blocks<S>(m, std::make_integer_sequence<int, N>{});
    if constexpr (S > 1) transpose_levels<S / 2>(m);
}

// Where query row i (head i / R, row i % R) keeps its probabilities; nullptr where it keeps none.
float* probability_row(const ColumnAttention& a, int64_t i) {
    const int64_t r = a.probs_slot ? a.probs_slot[i % a.rows] : i % a.rows;
    return r < 0 ? nullptr : a.probs + (i / a.rows) * a.probs_head_stride + r * a.keys;
}

// probs[i][j] = st[j][i] * inv_sum[i], N keys x N queries at a time through the transpose above;
// the last keys (L not a multiple of N) one at a time.
// rows[r][j0 .. j0 + N) = st[j0 .. j0 + N)[i0 + r] * inv_sum[i0 + r] for the first n of N rows
// (those with a row).
// A block may start at any query column i0 < Rp, so the loads may take up to N - 1 floats past a
// row of st: the next row's, or after the last row `max` and `inv_sum` (2 Rp >= 16 floats); those
// lanes are never stored.
template <int N>
[[gnu::always_inline]] inline void transpose_block(const Scratch& s, int64_t rp, int64_t i0,
                                                   int64_t j0, int64_t n,
                                                   const std::array<float*, N>& row) {
    Floats<N> m[N];
    for (int64_t r = 0; r < N; ++r) m[r] = load<Floats<N>>(s.st + (j0 + r) * rp + i0);
    transpose_levels<N / 2>(m);
    for (int64_t r = 0; r < n; ++r)
        if (row[static_cast<size_t>(r)] != nullptr)
            store(row[static_cast<size_t>(r)] + j0, m[r] * s.inv_sum[i0 + r]);
}

struct ProbabilitiesKernel {
    template <int N>
    [[gnu::always_inline]] static void run(const ColumnAttention& a, const Scratch& s, int64_t rp) {
        const int64_t rq = a.heads * a.rows, whole = a.keys / N * N;
        for (int64_t i0 = 0; i0 < rq;) {
            // A block starts at a query that keeps its probabilities: Elastic-Cache's window (16
            // of a cached step's 20-30 queries, anywhere among them) is one block, not two.
            if (probability_row(a, i0) == nullptr) {
                ++i0;
                continue;
            }
            const int64_t n = std::min<int64_t>(N, rq - i0);
            // The N queries' rows, found once per block of queries (a division each: per store
            // it took 70% of this loop, perf annotate).
            std::array<float*, N> row{};
            for (int64_t r = 0; r < n; ++r)
                row[static_cast<size_t>(r)] = probability_row(a, i0 + r);
            for (int64_t j0 = 0; j0 < whole; j0 += N) transpose_block<N>(s, rp, i0, j0, n, row);
            for (int64_t r = 0; r < n; ++r) {
                float* dst = row[static_cast<size_t>(r)];
                if (dst == nullptr) continue;
                for (int64_t j = whole; j < a.keys; ++j)
                    dst[j] = s.st[j * rp + i0 + r] * s.inv_sum[i0 + r];
            }
            i0 += N;
        }
    }
};

void write_probabilities(const ColumnAttention& a, const Scratch& s, int64_t rp) {
    cpu::run_at_vector_width<ProbabilitiesKernel>(a, s, rp);
}

// out rows of head j = exp-scores^T (R, L) @ v (L, Dh), then each row times its 1 / sum.
void weigh_values(const ColumnAttention& a, const Scratch& s, int64_t rp) {
    for (int64_t j = 0; j < a.heads; ++j) {
        FewRowsProduct p;
        p.x = s.st + j * a.rows;  // query row r of head j is column j R + r of st
        p.ldx = 1;
        p.ldxk = rp;
        p.wt = a.v;
        p.ldw = a.v_row_stride;
        p.y = a.out + j * a.out_head_stride;
        p.ldy = a.out_row_stride;
        p.rows = a.rows;
        p.inner = a.keys;
        p.columns = a.head_dim;
        few_rows_product(p, 0, a.head_dim);
        for (int64_t r = 0; r < a.rows; ++r) {
            float* row = p.y + r * p.ldy;
            const float factor = s.inv_sum[j * a.rows + r];
            for (int64_t d = 0; d < a.head_dim; ++d) row[d] *= factor;
        }
    }
}

// Where column_head_mean reads head h's probabilities: its scores (L, rp), their column's 1 / sum.
struct HeadScores {
    const float* st;
    const float* inv_sum;
};

// v as computed, rounded to its type: for GCC, which fuses a product into the sum that takes it
// across statements (one rounding instead of two: other bits), an empty asm it cannot see through.
// Clang fuses only within one expression.
template <class V>
[[gnu::always_inline]] inline V rounded(V v) {
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
    asm("" : "+x"(v));
#elif defined(__GNUC__) && !defined(__clang__)
    asm("" : "+g"(v));
#endif
    return v;
}

// The D query columns from c of key row j of one head, each probability as `probs` would hold it
// (float32).
template <int D>
[[gnu::always_inline]] inline Floats<D> probabilities(const HeadScores& h, int64_t rp, int64_t j,
                                                      int64_t c) {
    using F = Floats<D>;
    return load<F>(h.st + j * rp + c) * load<F>(h.inv_sum + c);
}

// The D key vectors (D query columns each) from j0 of the mean, summed over the heads in head
// order (head by head over the D keys: D independent sums under way): each probability rounded to
// float32 as `probs` holds it (not fused into the sum), summed in float32, not yet divided.
template <int D>
[[gnu::always_inline]] inline void head_sums(const HeadScores* hs, int64_t H, int64_t rp,
                                             int64_t j0, int64_t n_keys, int64_t r0,
                                             Floats<D> (&m)[D]) {
    for (int64_t k = 0; k < n_keys; ++k) m[k] = rounded(probabilities<D>(hs[0], rp, j0 + k, r0));
    for (int64_t h = 1; h < H; ++h)
        for (int64_t k = 0; k < n_keys; ++k)
            m[k] += rounded(probabilities<D>(hs[h], rp, j0 + k, r0));
}

// mean rows of query rows [r0, r0 + n) at keys [j0, j0 + nj), n, nj <= D: the head sums,
// transposed in registers, divided, stored along the rows. Whole: nj == D, whose constant trip
// counts keep the D vectors in registers (indexed by a variable they went to the stack).
template <int D, bool Whole>
[[gnu::always_inline]] inline void head_mean_block(const HeadScores* hs, int64_t H, int64_t rp,
                                                   int64_t keys, int64_t j0, int64_t nj, int64_t r0,
                                                   int64_t n, float* mean) {
    const int64_t n_keys = Whole ? D : nj;
    Floats<D> m[D] = {};
    head_sums<D>(hs, H, rp, j0, n_keys, r0, m);
    transpose_levels<D / 2>(m);  // m[r]: row r0 + r's keys from j0
    for (int64_t r = 0; r < n; ++r) {
        const Floats<D> row = divided_by_heads<Floats<D>, float>(m[r], H);
        float* dst = mean + (r0 + r) * keys + j0;
        if (Whole)
            __builtin_memcpy(dst, &row, sizeof row);  // inlined: one vector store
        else
            for (int64_t k = 0; k < nj; ++k) dst[k] = row[k];
    }
}

// Rows outermost, so that D rows of the mean are written along at a time: keys outermost (D keys'
// score rows kept in L1 while every query row took them) made d2cache steps 2-3% slower in place,
// its stores scattered over the freshly allocated mean, though not in isolation. D: half a vector
// of floats (8 on AVX-512), as when the sums were float64: a cached step's chunks of about 33
// query rows would leave most of a 16 x 16 block's rows empty.
struct HeadMeanKernel {
    template <int N>
    [[gnu::always_inline]] static void run(const std::vector<HeadScores>& heads, int64_t rows,
                                           int64_t rp, int64_t keys, float* mean) {
        constexpr int D = N / 2;  // floats per half vector
        const HeadScores* hs = heads.data();
        const auto H = static_cast<int64_t>(heads.size());
        const int64_t whole = keys / D * D;
        for (int64_t r0 = 0; r0 < rows; r0 += D) {
            const int64_t n = std::min<int64_t>(D, rows - r0);
            for (int64_t j0 = 0; j0 < whole; j0 += D)
                head_mean_block<D, true>(hs, H, rp, keys, j0, D, r0, n, mean);
            if (whole < keys)
                head_mean_block<D, false>(hs, H, rp, keys, whole, keys - whole, r0, n, mean);
        }
    }
};

// lo and hi += the two halves of f widened to doubles, lane by lane.
template <int N>
[[gnu::always_inline]] inline void add_widened(Floats<N> f, Doubles<N / 2>& lo,
                                               Doubles<N / 2>& hi) {
    Floats<N / 2> low, high;
    __builtin_memcpy(&low, &f, sizeof low);
    __builtin_memcpy(&high, reinterpret_cast<const char*>(&f) + sizeof low, sizeof high);
    lo += to_doubles<N / 2>(low);
    hi += to_doubles<N / 2>(high);
}

// column_window_sums of one kv head: N keys at a time, the N x N blocks of scores along the query
// columns that hold a window row, transposed in registers (each vector then one column's N keys),
// times the column's 1 / sum (each probability as `probs` would hold it), widened and added where
// the column is a window row's, in column order: heads outermost, then rows, the definition's
// order. Each lane is one key's sum in that order, so every width gives the same bits. 3.0-3.2 us
// a kv head where its attention takes 35 (16 window rows of 22, 2 heads, 439 keys, AVX-512);
// scalar loops over the strided scores took about 5. window (rp + N): 1 at a window row's column.
// Whole: N keys, else nj < N (only those rows of st are read: the rows past the last are not the
// scratch's).
template <int N, bool Whole>
[[gnu::always_inline]] inline void window_sums_block(const Scratch& s, int64_t rp, int64_t j0,
                                                     int64_t nj, const uint8_t* window,
                                                     double* sums) {
    Doubles<N / 2> lo = {}, hi = {};
    for (int64_t i0 = 0; i0 < rp; i0 += N) {
        bool any = false;
        for (int64_t c = 0; c < N; ++c) any |= window[i0 + c] != 0;
        if (!any) continue;
        Floats<N> m[N];
        for (int64_t r = 0; r < N; ++r)
            m[r] = Whole || r < nj ? load<Floats<N>>(s.st + (j0 + r) * rp + i0) : Floats<N>{};
        transpose_levels<N / 2>(m);  // m[c]: column i0 + c at keys j0 ...
        for (int64_t c = 0; c < N; ++c)
            if (window[i0 + c]) add_widened<N>(m[c] * s.inv_sum[i0 + c], lo, hi);
    }
    double out[N];
    __builtin_memcpy(out, &lo, sizeof lo);
    __builtin_memcpy(out + N / 2, &hi, sizeof hi);
    for (int64_t k = 0; k < (Whole ? N : nj); ++k) sums[j0 + k] = out[k];
}

struct WindowSumsKernel {
    template <int N>
    [[gnu::always_inline]] static void run(const Scratch& s, int64_t rp, int64_t keys,
                                           const uint8_t* window, double* sums) {
        const int64_t whole = keys / N * N;
        for (int64_t j0 = 0; j0 < whole; j0 += N)
            window_sums_block<N, true>(s, rp, j0, N, window, sums);
        if (whole < keys) window_sums_block<N, false>(s, rp, whole, keys - whole, window, sums);
    }
};

}  // namespace

float softmax_exp(float x) {
    return row_exp::exp_of_nonpositive(x);
}

int64_t column_attention_scratch(int64_t heads, int64_t rows, int64_t keys, int64_t head_dim) {
    const int64_t rp = padded(heads * rows);
    return rp * (head_dim + keys + 2);
}

void column_attention(const ColumnAttention& a, float* scratch) {
    const int64_t rp = padded(a.heads * a.rows);
    if (rp == 0 || a.keys == 0) return;
    const Scratch s = carve(scratch, rp, a.keys, a.head_dim);
    transpose_queries(a, s.qt, rp);
    FewRowsProduct scores;  // st (L, Rp) = k (L, Dh) @ qt (Dh, Rp)
    scores.x = a.k;
    scores.ldx = a.k_row_stride;
    scores.wt = s.qt;
    scores.ldw = rp;
    scores.y = s.st;
    scores.ldy = rp;
    scores.rows = a.keys;
    scores.inner = a.head_dim;
    scores.columns = rp;
    few_rows_product(scores, 0, rp);
    column_softmax_stats(s, a.keys, rp, a.scale);
    if (a.probs) write_probabilities(a, s, rp);
    weigh_values(a, s, rp);
}

void column_head_mean(const ColumnAttention& a, const float* const* scratches, int64_t kv_heads,
                      float* mean) {
    const int64_t rp = padded(a.heads * a.rows);
    if (rp == 0 || a.keys == 0) return;
    std::vector<HeadScores> heads;  // in head order: kv head n's g heads, columns j R ...
    heads.reserve(static_cast<size_t>(kv_heads * a.heads));
    for (int64_t n = 0; n < kv_heads; ++n) {
        const Scratch s = carve(const_cast<float*>(scratches[n]), rp, a.keys, a.head_dim);
        for (int64_t j = 0; j < a.heads; ++j)
            heads.push_back({s.st + j * a.rows, s.inv_sum + j * a.rows});
    }
    cpu::run_at_vector_width<HeadMeanKernel>(heads, a.rows, rp, a.keys, mean);
}

double column_head_mean_f32_at(const ColumnAttention& a, const float* const* scratches,
                               int64_t kv_heads, int64_t row, int64_t key) {
    const int64_t rp = padded(a.heads * a.rows);
    float sum = 0.0F;  // + the first head's probability: exactly it, as head_sums starts
    for (int64_t n = 0; n < kv_heads; ++n) {
        const Scratch s = carve(const_cast<float*>(scratches[n]), rp, a.keys, a.head_dim);
        for (int64_t j = 0; j < a.heads; ++j) {
            const int64_t c = j * a.rows + row;
            sum += rounded(s.st[key * rp + c] * s.inv_sum[c]);  // the float32 probability
        }
    }
    return static_cast<double>(divided_by_heads<float, float>(sum, kv_heads * a.heads));
}

void column_window_sums(const ColumnAttention& a, const float* scratch, const int64_t* rows,
                        int64_t n_rows, double* sums) {
    const int64_t rp = padded(a.heads * a.rows);
    std::fill(sums, sums + a.keys, 0.0);
    if (rp == 0 || a.keys == 0 || n_rows == 0) return;
    const Scratch s = carve(const_cast<float*>(scratch), rp, a.keys, a.head_dim);
    // 1 at head j's row r, column j R + r; past rp (a block's columns beyond the padding) none.
    std::vector<uint8_t> window(static_cast<size_t>(rp + kMaxVectorFloats), 0);
    for (int64_t j = 0; j < a.heads; ++j)
        for (int64_t i = 0; i < n_rows; ++i) window[static_cast<size_t>(j * a.rows + rows[i])] = 1;
    cpu::run_at_vector_width<WindowSumsKernel>(s, rp, a.keys, window.data(), sums);
}

}  // namespace cl::detail

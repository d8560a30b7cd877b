#include "engine/generation/row_sampler.h"

#include "engine/base/cpu_clones.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cl::detail {
namespace {

// Float64 vectors of four lanes: one AVX2 register, two SSE2 ones, half an AVX-512 one. Wider
// generic vectors are split badly (GCC 12 turned eight-lane comparisons on AVX2 into a scalar
// compare and a stack spill per lane: 13 ns a logit). The sums keep eight partial sums as two of
// them, so every instruction set adds in the same order (AVX2 and AVX-512 give the same bits; the
// SSE2 baseline has no fused multiply-add). The vectors stay inside always-inlined templates of
// this unit (-Wno-psabi for GCC).
constexpr int kLanes = 4;
constexpr int kStride = 2 * kLanes;  // logits per loop iteration: two independent vectors
template <int L>
struct VectorOf {
    typedef double doubles __attribute__((vector_size(L * sizeof(double))));
    typedef int64_t int64s __attribute__((vector_size(L * sizeof(int64_t))));
};
template <int L>
using DoublesOf = typename VectorOf<L>::doubles;
template <int L>
using Int64sOf = typename VectorOf<L>::int64s;
using Doubles = DoublesOf<kLanes>;
using Int64s = Int64sOf<kLanes>;
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// exp(-708) = 3.3e-308 is still normal; below it the kernel gives 0 (a denormal in libm).
constexpr double kMinArg = -708.0;
constexpr double kLog2e = 1.4426950408889634;
// ln 2 = kLn2Hi + kLn2Lo with n * kLn2Hi exact for |n| < 2^30 (Cephes' Cody-Waite split).
constexpr double kLn2Hi = 6.93145751953125e-1;
constexpr double kLn2Lo = 1.42860682030941723212e-6;
constexpr double kRoundingShift = 0x1.8p52;
constexpr int64_t kRoundingShiftBits = 0x4338000000000000;  // the bits of 0x1.8p52

template <int L = kLanes>
[[gnu::always_inline]] inline DoublesOf<L> broadcast(double v) {
    DoublesOf<L> out;
    for (int l = 0; l < L; ++l) out[l] = v;
    return out;
}

// Lane-wise mask ? a : b (the mask from a comparison: all ones or zero per lane).
template <int L = kLanes>
[[gnu::always_inline]] inline DoublesOf<L> select(Int64sOf<L> mask, DoublesOf<L> a,
                                                  DoublesOf<L> b) {
    const auto ia = __builtin_bit_cast(Int64sOf<L>, a), ib = __builtin_bit_cast(Int64sOf<L>, b);
    return __builtin_bit_cast(DoublesOf<L>, (mask & ia) | (~mask & ib));
}

template <int L = kLanes>
[[gnu::always_inline]] inline DoublesOf<L> load(const double* p) {
    DoublesOf<L> v;
    __builtin_memcpy(&v, p, sizeof v);  // unaligned
    return v;
}

template <int Unused = 0>
[[gnu::always_inline]] inline bool any_lane(Int64s mask) {
    return ((mask[0] | mask[1]) | (mask[2] | mask[3])) != 0;
}

// The eight partial sums lo[0..3], hi[0..3] in a fixed order: deterministic.
template <int Unused = 0>
[[gnu::always_inline]] inline double lane_sum(Doubles lo, Doubles hi) {
    return ((lo[0] + hi[0]) + (lo[2] + hi[2])) + ((lo[1] + hi[1]) + (lo[3] + hi[3]));
}

// exp(x) for kMinArg <= x <= 0: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by its Taylor series to
// r^13 (truncation < 4e-18 relative), 2^n built in the exponent bits. The polynomial in Estrin's
// scheme (pairs, then powers r^2, r^4, r^8): a chain of 5 multiply-adds where Horner's has 14,
// which kept a row at 3.5 ns a logit waiting on latency (AMD Zen 3).
template <int L = kLanes>
[[gnu::always_inline]] inline DoublesOf<L> exp_in_range(DoublesOf<L> x) {
    using D = DoublesOf<L>;
    using I = Int64sOf<L>;
    // n = round(x / ln2) by adding 1.5 * 2^52, where the unit is the last bit: n is then also in
    // the sum's low bits as an integer, with no conversion instruction (four on AVX2).
    const D shifted = x * kLog2e + kRoundingShift;
    const D n = shifted - kRoundingShift;
    const D r = (x - n * kLn2Hi) - n * kLn2Lo;
    constexpr double kInverseFactorials[] = {1.0,
                                             1.0,
                                             1.0 / 2.0,
                                             1.0 / 6.0,
                                             1.0 / 24.0,
                                             1.0 / 120.0,
                                             1.0 / 720.0,
                                             1.0 / 5040.0,
                                             1.0 / 40320.0,
                                             1.0 / 362880.0,
                                             1.0 / 3628800.0,
                                             1.0 / 39916800.0,
                                             1.0 / 479001600.0,
                                             1.0 / 6227020800.0};  // 1/0! .. 1/13!
    const auto pair = [&](int i) {                                 // c_i + c_(i+1) r
        return r * kInverseFactorials[i + 1] + kInverseFactorials[i];
    };
    const D r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    const D low = (pair(0) + pair(2) * r2) + (pair(4) + pair(6) * r2) * r4;  // to r^7
    const D high = (pair(8) + pair(10) * r2) + pair(12) * r4;                // r^8 to r^13
    const D p = low + high * r8;
    const I n_int = __builtin_bit_cast(I, shifted) - kRoundingShiftBits;
    const I exponent = (n_int + 1023) << 52;
    return p * __builtin_bit_cast(D, exponent);
}

// The softmax terms of four logits d = logit - max <= 0 (-inf allowed): e = exp(d) and e * d,
// both 0 below kMinArg (so where d is -inf).
template <int L = kLanes>
[[gnu::always_inline]] inline void add_terms(DoublesOf<L> d, DoublesOf<L>& sum,
                                             DoublesOf<L>& weighted) {
    using D = DoublesOf<L>;
    using I = Int64sOf<L>;
    const I in_range = d >= kMinArg;
    const D clamped = select<L>(in_range, d, broadcast<L>(kMinArg));
    const D e = __builtin_bit_cast(D, in_range & __builtin_bit_cast(I, exp_in_range<L>(clamped)));
    sum += e;
    weighted += e * clamped;  // e is 0 where clamped is not d
}

// Four floats widened into row; bad gets the lanes that are NaN or infinite, max the larger.
template <int Unused = 0>
[[gnu::always_inline]] inline void widen_four(const float* x, double* row, Int64s& bad,
                                              Doubles& max) {
    Floats f;
    __builtin_memcpy(&f, x, sizeof f);
    const Doubles d = __builtin_convertvector(f, Doubles);
    __builtin_memcpy(row, &d, sizeof d);
    const Doubles z = d * 0.0;  // NaN exactly where d is NaN or infinite
    bad |= z != z;
    max = select(d > max, d, max);
}

// row = x in float64 and its maximum (-inf where V = 0); false when a logit is NaN or infinite
// (the maximum is then meaningless).
template <int Unused = 0>
[[gnu::always_inline]] inline bool widen(const float* x, int64_t V, double* row, double& max) {
    Int64s bad_lo{}, bad_hi{};
    Doubles max_lo = broadcast(kNegInf), max_hi = max_lo;
    int64_t i = 0;
    for (; i + kStride <= V; i += kStride) {
        widen_four(x + i, row + i, bad_lo, max_lo);
        widen_four(x + i + kLanes, row + i + kLanes, bad_hi, max_hi);
    }
    bool any_bad = any_lane(bad_lo | bad_hi);
    max = kNegInf;
    for (int l = 0; l < kLanes; ++l) max = std::max({max, max_lo[l], max_hi[l]});
    for (; i < V; ++i) {
        row[i] = static_cast<double>(x[i]);
        any_bad = any_bad || !std::isfinite(row[i]);
        max = std::max(max, row[i]);
    }
    return !any_bad;
}

template <int Unused = 0>
[[gnu::always_inline]] inline double row_max(const double* row, int64_t V) {
    Doubles m_lo = broadcast(kNegInf), m_hi = m_lo;
    int64_t i = 0;
    for (; i + kStride <= V; i += kStride) {
        const Doubles lo = load(row + i), hi = load(row + i + kLanes);
        m_lo = select(lo > m_lo, lo, m_lo);
        m_hi = select(hi > m_hi, hi, m_hi);
    }
    double best = kNegInf;
    for (int l = 0; l < kLanes; ++l) best = std::max({best, m_lo[l], m_hi[l]});
    for (; i < V; ++i) best = std::max(best, row[i]);
    return best;
}

// sum exp(row - max) and sum exp(row - max) (row - max); the last lanes padded with -inf. Eight
// partial sums per row, as kStride / L vectors of L lanes: two of four (AVX2, SSE2) or one of
// eight (AVX-512). Lane l of the eight sums the logits i = l mod 8 in order either way, so both
// give the same bits; one eight-lane vector takes half the instructions.
template <int L = kLanes>
[[gnu::always_inline]] inline void exp_sums(const double* row, int64_t V, double max, double& sum,
                                            double& weighted) {
    using D = DoublesOf<L>;
    constexpr int kVectors = kStride / L;
    D s[kVectors] = {}, w[kVectors] = {};
    const D m = broadcast<L>(max);
    const auto add_block = [&](const double* p) {
        for (int v = 0; v < kVectors; ++v) add_terms<L>(load<L>(p + v * L) - m, s[v], w[v]);
    };
    int64_t i = 0;
    for (; i + kStride <= V; i += kStride) add_block(row + i);
    if (i < V) {
        double tail[kStride];
        for (int64_t j = 0; j < kStride; ++j) tail[j] = i + j < V ? row[i + j] : kNegInf;
        add_block(tail);
    }
    // Back to the lo / hi pairs lane_sum adds in its fixed order.
    Doubles s_lo, s_hi, w_lo, w_hi;
    for (int l = 0; l < kLanes; ++l) {
        s_lo[l] = s[l / L][l % L];
        s_hi[l] = s[(l + kLanes) / L][(l + kLanes) % L];
        w_lo[l] = w[l / L][l % L];
        w_hi[l] = w[(l + kLanes) / L][(l + kLanes) % L];
    }
    sum = lane_sum(s_lo, s_hi);
    weighted = lane_sum(w_lo, w_hi);
}

// Bit j set where p[j] > threshold, for the eight values at p.
template <int Unused = 0>
[[gnu::always_inline]] inline unsigned lanes_above(const double* p, double threshold) {
    const Doubles t = broadcast(threshold);
    const Int64s lo = load(p) > t, hi = load(p + kLanes) > t;
    if (!any_lane(lo | hi)) return 0;  // most blocks, once the k kept are large: no lane to gather
    unsigned bits = 0;
    for (int l = 0; l < kLanes; ++l) {
        bits |= static_cast<unsigned>(lo[l] & 1) << l;
        bits |= static_cast<unsigned>(hi[l] & 1) << (l + kLanes);
    }
    return bits;
}

// The clones: each pass over the row in the widest vectors the CPU has.
CL_CPU_CLONES bool widen_row(const float* x, int64_t V, double* row, double& max) {
    return widen(x, V, row, max);
}

CL_CPU_CLONES double max_of_row(const double* row, int64_t V) {
    return row_max(row, V);
}

struct ExpSumsKernel {
    template <int N>
    [[gnu::always_inline]] static void run(const double* row, int64_t V, double max, double& sum,
                                           double& weighted) {
        exp_sums<(N >= 16 ? kStride : kLanes)>(row, V, max, sum, weighted);
    }
};

void exp_sums_of_row(const double* row, int64_t V, double max, double& sum, double& weighted) {
    cpu::run_at_vector_width<ExpSumsKernel>(row, V, max, sum, weighted);
}

// Inserts row[i] into the k ids kept so far (largest first) if it belongs there.
[[gnu::always_inline]] inline void insert_id(const double* row, int64_t i, int64_t k, int64_t& kept,
                                             int32_t* ids) {
    if (kept == k && !(row[i] > row[ids[k - 1]])) return;
    int64_t at = std::min(kept, k - 1);
    while (at > 0 && row[i] > row[ids[at - 1]]) {
        ids[at] = ids[at - 1];
        --at;
    }
    ids[at] = static_cast<int32_t>(i);
    kept = std::min(kept + 1, k);
}

// The ids of the k largest of row, largest first, equal values by lower id: an insertion into
// the k kept so far. Once k are kept, eight logits at a time are compared with the k-th in one
// vector comparison, and only those above it are inserted (in id order, each checked again
// against the k-th it may have raised).
CL_CPU_CLONES void top_ids_of(const double* row, int64_t V, int64_t k, int32_t* ids) {
    int64_t kept = 0, i = 0;
    for (; i < V && kept < k; ++i) insert_id(row, i, k, kept, ids);
    for (; i + kStride <= V; i += kStride)
        for (unsigned bits = lanes_above(row + i, row[ids[k - 1]]); bits != 0; bits &= bits - 1)
            insert_id(row, i + __builtin_ctz(bits), k, kept, ids);
    for (; i < V; ++i) insert_id(row, i, k, kept, ids);
}

}  // namespace

RowSummary summarize_row(const float* x, int64_t V, int32_t excluded_a, int32_t excluded_b,
                         int64_t k, double* row, int32_t* top_ids) {
    RowSummary s;
    double widened_max = kNegInf;
    const bool all_finite = widen_row(x, V, row, widened_max);
    bool max_excluded = false;
    for (int32_t id : {excluded_a, excluded_b})
        if (id >= 0 && id < V) {
            max_excluded = max_excluded || row[id] == widened_max;
            row[id] = kNegInf;
        }
    if (!all_finite)  // -inf is a logit the softmax takes (probability 0); NaN and +inf are not
        for (int64_t i = 0; i < V; ++i)
            if (std::isnan(row[i]) || row[i] == -kNegInf) return s;
    // The widening pass's maximum (-inf logits never raise it) holds unless an excluded id had it.
    s.max = max_excluded ? max_of_row(row, V) : widened_max;
    if (!std::isfinite(s.max)) return s;  // every logit excluded
    double weighted = 0.0;
    exp_sums_of_row(row, V, s.max, s.sum, weighted);
    s.entropy = std::log(s.sum) - weighted / s.sum;
    top_ids_of(row, V, k, top_ids);
    s.finite = true;
    return s;
}

double probability_of(const RowSummary& s, double logit) {
    return std::exp(logit - s.max) / s.sum;
}

}  // namespace cl::detail

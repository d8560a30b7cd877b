#include "engine/generation/row_sampler.h"

#include "engine/base/cpu_clones.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cl::detail {
namespace {

// Eight float64 lanes: one AVX-512 register, two AVX2 ones, four SSE2 ones. The vectors stay
// inside always-inlined templates of this unit (Clang refuses them as arguments of a clone built
// without AVX-512; -Wno-psabi for GCC).
constexpr int kLanes = 8;
using Doubles = double __attribute__((vector_size(kLanes * sizeof(double))));
using Int64s = int64_t __attribute__((vector_size(kLanes * sizeof(int64_t))));
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Int32s = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// exp(-708) = 3.3e-308 is still normal; below it the kernel gives 0 (a denormal in libm).
constexpr double kMinArg = -708.0;
constexpr double kLog2e = 1.4426950408889634;
// ln 2 = kLn2Hi + kLn2Lo with n * kLn2Hi exact for |n| < 2^30 (Cephes' Cody-Waite split).
constexpr double kLn2Hi = 6.93145751953125e-1;
constexpr double kLn2Lo = 1.42860682030941723212e-6;

template <int Unused = 0>
[[gnu::always_inline]] inline Doubles broadcast(double v) {
    return Doubles{v, v, v, v, v, v, v, v};
}

// Lane-wise mask ? a : b (the mask from a comparison: all ones or zero per lane).
template <int Unused = 0>
[[gnu::always_inline]] inline Doubles select(Int64s mask, Doubles a, Doubles b) {
    const auto ia = __builtin_bit_cast(Int64s, a), ib = __builtin_bit_cast(Int64s, b);
    return __builtin_bit_cast(Doubles, (mask & ia) | (~mask & ib));
}

template <int Unused = 0>
[[gnu::always_inline]] inline Doubles load(const double* p) {
    Doubles v;
    __builtin_memcpy(&v, p, sizeof v);  // unaligned
    return v;
}

template <int Unused = 0>
[[gnu::always_inline]] inline double lane_sum(Doubles v) {  // a fixed order: deterministic
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

// exp(x) for kMinArg <= x <= 0: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by its Taylor series to
// r^13 (truncation < 4e-18 relative), 2^n built in the exponent bits.
template <int Unused = 0>
[[gnu::always_inline]] inline Doubles exp_in_range(Doubles x) {
    // n = round(x / ln2): for a non-positive argument truncating (y - 1/2) rounds to nearest.
    const Int32s n_int = __builtin_convertvector(x * kLog2e - 0.5, Int32s);
    const Doubles n = __builtin_convertvector(n_int, Doubles);
    const Doubles r = (x - n * kLn2Hi) - n * kLn2Lo;
    constexpr double kInverseFactorials[] = {1.0 / 6227020800.0,
                                             1.0 / 479001600.0,
                                             1.0 / 39916800.0,
                                             1.0 / 3628800.0,
                                             1.0 / 362880.0,
                                             1.0 / 40320.0,
                                             1.0 / 5040.0,
                                             1.0 / 720.0,
                                             1.0 / 120.0,
                                             1.0 / 24.0,
                                             1.0 / 6.0,
                                             1.0 / 2.0,
                                             1.0,
                                             1.0};  // 1/13! .. 1/0!
    Doubles p = broadcast(kInverseFactorials[0]);
    for (int i = 1; i < 14; ++i) p = p * r + kInverseFactorials[i];
    const Int64s exponent = (__builtin_convertvector(n_int, Int64s) + 1023) << 52;
    return p * __builtin_bit_cast(Doubles, exponent);
}

// The softmax terms of eight logits d = logit - max <= 0 (-inf allowed): e = exp(d) and e * d,
// both 0 where d is -inf.
template <int Unused = 0>
[[gnu::always_inline]] inline void add_terms(Doubles d, Doubles& sum, Doubles& weighted) {
    const Int64s in_range = d >= kMinArg;
    const Doubles clamped = select(in_range, d, broadcast(kMinArg));
    const Doubles e = select(in_range, exp_in_range(clamped), broadcast(0.0));
    sum += e;
    weighted += e * select(in_range, d, broadcast(0.0));
}

// row = x in float64; false when a logit is NaN or infinite.
template <int Unused = 0>
[[gnu::always_inline]] inline bool widen(const float* x, int64_t V, double* row) {
    Int64s bad{};
    int64_t i = 0;
    for (; i + kLanes <= V; i += kLanes) {
        Floats f;
        __builtin_memcpy(&f, x + i, sizeof f);
        const Doubles d = __builtin_convertvector(f, Doubles);
        __builtin_memcpy(row + i, &d, sizeof d);
        const Doubles z = d * 0.0;  // NaN exactly where d is NaN or infinite
        bad |= z != z;
    }
    bool any_bad = false;
    for (int l = 0; l < kLanes; ++l) any_bad = any_bad || bad[l] != 0;
    for (; i < V; ++i) {
        row[i] = static_cast<double>(x[i]);
        any_bad = any_bad || !std::isfinite(row[i]);
    }
    return !any_bad;
}

template <int Unused = 0>
[[gnu::always_inline]] inline double row_max(const double* row, int64_t V) {
    Doubles m = broadcast(kNegInf);
    int64_t i = 0;
    for (; i + kLanes <= V; i += kLanes) {
        const Doubles v = load(row + i);
        m = select(v > m, v, m);
    }
    double best = kNegInf;
    for (int l = 0; l < kLanes; ++l) best = std::max(best, m[l]);
    for (; i < V; ++i) best = std::max(best, row[i]);
    return best;
}

// sum exp(row - max) and sum exp(row - max) (row - max); the last lanes padded with -inf.
template <int Unused = 0>
[[gnu::always_inline]] inline void exp_sums(const double* row, int64_t V, double max, double& sum,
                                            double& weighted) {
    Doubles s{}, w{};
    const Doubles m = broadcast(max);
    int64_t i = 0;
    for (; i + kLanes <= V; i += kLanes) add_terms(load(row + i) - m, s, w);
    if (i < V) {
        Doubles tail = broadcast(kNegInf);
        for (int64_t j = i; j < V; ++j) tail[j - i] = row[j];
        add_terms(tail - m, s, w);
    }
    sum = lane_sum(s);
    weighted = lane_sum(w);
}

// The clones: each pass over the row in the widest vectors the CPU has.
CL_CPU_CLONES bool widen_row(const float* x, int64_t V, double* row) {
    return widen(x, V, row);
}

CL_CPU_CLONES double max_of_row(const double* row, int64_t V) {
    return row_max(row, V);
}

CL_CPU_CLONES void exp_sums_of_row(const double* row, int64_t V, double max, double& sum,
                                   double& weighted) {
    exp_sums(row, V, max, sum, weighted);
}

// The ids of the k largest of row, largest first, equal values by lower id: an insertion into
// the k kept so far, which a scan mostly skips (one comparison per logit).
void top_ids_of(const double* row, int64_t V, int64_t k, int32_t* ids) {
    int64_t kept = 0;
    for (int64_t i = 0; i < V; ++i) {
        if (kept == k && !(row[i] > row[ids[k - 1]])) continue;
        int64_t at = std::min(kept, k - 1);
        while (at > 0 && row[i] > row[ids[at - 1]]) {
            ids[at] = ids[at - 1];
            --at;
        }
        ids[at] = static_cast<int32_t>(i);
        kept = std::min(kept + 1, k);
    }
}

}  // namespace

RowSummary summarize_row(const float* x, int64_t V, int32_t excluded_a, int32_t excluded_b,
                         int64_t k, double* row, int32_t* top_ids) {
    RowSummary s;
    const bool all_finite = widen_row(x, V, row);
    for (int32_t id : {excluded_a, excluded_b})
        if (id >= 0 && id < V) row[id] = kNegInf;
    if (!all_finite)  // -inf is a logit the softmax takes (probability 0); NaN and +inf are not
        for (int64_t i = 0; i < V; ++i)
            if (std::isnan(row[i]) || row[i] == -kNegInf) return s;
    s.max = max_of_row(row, V);
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

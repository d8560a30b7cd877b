#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "engine/base/cpu_clones.h"
#include "engine/cuda/certainty_density.h"

namespace cl::cuda {
namespace {

// Positions whose sums run side by side, each its own sums in the definition's order: two vectors
// of 8 doubles each (one 64-byte register on AVX-512; the compiler splits them elsewhere).
typedef double Lanes __attribute__((vector_size(64)));
constexpr int64_t kLanesPerVector = sizeof(Lanes) / sizeof(double);
constexpr int64_t kLanes = 2 * kLanesPerVector;

// The sums of the kLanes positions from i0: den over the positions within `longest` that exist,
// num over those of them that are known. in and known (padded by `pad` >= longest on each side):
// 1.0 where position j exists (is known), else 0.0, at j + pad. A lane adds w * 0.0 = +0.0 for a
// position its definition skips, which leaves a sum of positive weights (or its +0.0 start) as it
// is, and every other weight in the same order as the loop over j: the same bits. The sums stay
// in registers across the offsets (in arrays the compiler kept them in memory: slower than one
// position at a time).
CL_CPU_CLONES void density_sums(const double* __restrict in, const double* __restrict known,
                                const double* __restrict weight, int64_t longest, int64_t i0,
                                int64_t pad, double* __restrict num, double* __restrict den) {
    Lanes n0 = {}, n1 = {}, d0 = {}, d1 = {};
    for (int64_t off = -longest; off <= longest; ++off) {
        const double w = weight[std::abs(off)];
        const int64_t at = pad + i0 + off;
        Lanes v[4];  // unaligned loads
        __builtin_memcpy(&v[0], in + at, sizeof(Lanes));
        __builtin_memcpy(&v[1], in + at + kLanesPerVector, sizeof(Lanes));
        __builtin_memcpy(&v[2], known + at, sizeof(Lanes));
        __builtin_memcpy(&v[3], known + at + kLanesPerVector, sizeof(Lanes));
        d0 += w * v[0];
        d1 += w * v[1];
        n0 += w * v[2];
        n1 += w * v[3];
    }
    __builtin_memcpy(num, &n0, sizeof n0);
    __builtin_memcpy(num + kLanesPerVector, &n1, sizeof n1);
    __builtin_memcpy(den, &d0, sizeof d0);
    __builtin_memcpy(den + kLanesPerVector, &d1, sizeof d1);
}

}  // namespace

void certainty_density_cpu(const uint8_t* masked, int64_t L, DensityRange range, double* out) {
    const double two_s2 = 2.0 * range.sigma * range.sigma;
    const auto reach = static_cast<int64_t>(std::ceil(range.sigma * 6));
    // The kernel's weight at each distance, computed once (an exp per pair before: 121 per
    // position at sigma 10); the same expression, so the same bits.
    const int64_t longest = std::min(reach, std::max<int64_t>(L - 1, 0));  // no pair is farther
    std::vector<double> weight(static_cast<size_t>(longest) + 1);
    for (int64_t d = 0; d <= longest; ++d)
        weight[static_cast<size_t>(d)] = std::exp(-static_cast<double>(d * d) / two_s2);
    const int64_t begin = std::max<int64_t>(range.begin, 0), end = std::min(range.end, L);
    if (begin >= end) return;
    // kLanes positions at a time, blocks without a mask skipped: position by position, two
    // dependent sums each, the prior took about three times as long.
    const int64_t pad = longest + kLanes;
    std::vector<double> in(static_cast<size_t>(L + 2 * pad), 0.0);  // (L) + padding
    std::vector<double> known(in.size(), 0.0);
    for (int64_t j = 0; j < L; ++j) {
        in[static_cast<size_t>(pad + j)] = 1.0;
        known[static_cast<size_t>(pad + j)] = masked[j] ? 0.0 : 1.0;
    }
    double num[kLanes], den[kLanes];
    for (int64_t i0 = begin; i0 < end; i0 += kLanes) {
        const int64_t i1 = std::min(end, i0 + kLanes);
        if (range.masked_only &&
            std::none_of(masked + i0, masked + i1, [](uint8_t m) { return m; }))
            continue;  // nothing of these positions is written
        density_sums(in.data(), known.data(), weight.data(), longest, i0, pad, num, den);
        for (int64_t l = 0; l < i1 - i0; ++l) {
            if (range.masked_only && !masked[i0 + l]) continue;
            out[i0 + l] = den[l] > 0 ? num[l] / den[l] : 0;
        }
    }
}

}  // namespace cl::cuda

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "engine/cuda/certainty_density.h"

namespace cl::cuda {

void certainty_density_cpu(const uint8_t* masked, int64_t L, DensityRange range, double* out) {
    const double two_s2 = 2.0 * range.sigma * range.sigma;
    const auto reach = static_cast<int64_t>(std::ceil(range.sigma * 6));
    // The kernel's weight at each distance, computed once (an exp per pair before: 121 per
    // position at sigma 10); the same expression, so the same bits.
    const int64_t longest = std::min(reach, std::max<int64_t>(L - 1, 0));  // no pair is farther
    std::vector<double> weight(static_cast<size_t>(longest) + 1);
    for (int64_t d = 0; d <= longest; ++d)
        weight[static_cast<size_t>(d)] = std::exp(-static_cast<double>(d * d) / two_s2);
    for (int64_t i = std::max<int64_t>(range.begin, 0); i < std::min(range.end, L); ++i) {
        if (range.masked_only && !masked[i]) continue;
        double num = 0, den = 0;
        for (int64_t j = std::max<int64_t>(0, i - reach); j < std::min(L, i + reach + 1); ++j) {
            const double k = weight[static_cast<size_t>(std::abs(i - j))];
            den += k;
            if (!masked[j]) num += k;
        }
        out[i] = den > 0 ? num / den : 0;
    }
}

}  // namespace cl::cuda

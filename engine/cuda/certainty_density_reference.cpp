#include <algorithm>
#include <cmath>

#include "engine/cuda/certainty_density.h"

namespace cl::cuda {

void certainty_density_cpu(const uint8_t* masked, int64_t L, DensityRange range, double* out) {
    const double two_s2 = 2.0 * range.sigma * range.sigma;
    const auto reach = static_cast<int64_t>(std::ceil(range.sigma * 6));
    for (int64_t i = std::max<int64_t>(range.begin, 0); i < std::min(range.end, L); ++i) {
        if (range.masked_only && !masked[i]) continue;
        double num = 0, den = 0;
        for (int64_t j = std::max<int64_t>(0, i - reach); j < std::min(L, i + reach + 1); ++j) {
            const double k = std::exp(-static_cast<double>((i - j) * (i - j)) / two_s2);
            den += k;
            if (!masked[j]) num += k;
        }
        out[i] = den > 0 ? num / den : 0;
    }
}

}  // namespace cl::cuda

// The small statistics every front end reports, defined once: the median of repeated timings,
// the Wilson score interval of an accuracy, and the exact McNemar test of a paired comparison.
// Header-only, standard library only.
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace cl::stats {

// The median (the mean of the two middle values for an even count); 0 for no values.
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    const size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    const double upper = v[mid];
    if (v.size() % 2) return upper;
    const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
    return (lower + upper) / 2;
}

// The 95% Wilson score interval of `successes` out of `n` (honest about small samples).
inline std::pair<double, double> wilson_interval(int successes, int n, double z = 1.96) {
    if (n <= 0) return {0.0, 1.0};
    const double p = static_cast<double>(successes) / n, nn = n;
    const double centre = (p + z * z / (2 * nn)) / (1 + z * z / nn);
    const double half = z * std::sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / (1 + z * z / nn);
    return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

// Two-sided exact McNemar test of a paired comparison on the same items: `fixed` items only the
// policy got right, `broken` items only the baseline got right. The probability, if the policy
// changed nothing but noise (each discordant item a fair coin), of a split at least this uneven.
inline double paired_exact_p(int fixed, int broken) {
    const int n = fixed + broken, k = std::min(fixed, broken);
    if (n <= 0 || k < 0) return 1.0;
    double tail = 0;  // P(X <= k), X ~ Binomial(n, 1/2), in log space (n may be large)
    for (int i = 0; i <= k; ++i)
        tail += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) -
                         n * std::log(2.0));
    return std::min(1.0, 2 * tail);
}

}  // namespace cl::stats

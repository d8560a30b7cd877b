#include <algorithm>

#include "engine/cuda/ranking.h"

namespace cl::cuda {

std::vector<int64_t> select_top_k_cpu(const double* score, const uint8_t* eligible, int64_t n,
                                      TopKRule rule) {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < n; ++i)
        if (!eligible || eligible[i]) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    size_t keep = 0;
    if (rule.threshold > 0) {
        while (keep < order.size() && score[order[keep]] >= rule.threshold) ++keep;
        keep = std::max(keep, std::min<size_t>(1, order.size()));
    } else {
        keep = std::min(order.size(), static_cast<size_t>(std::max<int64_t>(rule.k, 0)));
    }
    order.resize(keep);
    return order;
}

}  // namespace cl::cuda

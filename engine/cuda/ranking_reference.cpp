#include <algorithm>
#include <cstddef>

#include "engine/cuda/ranking.h"

namespace cl::cuda {

std::vector<int64_t> select_top_k_cpu(const double* score, const uint8_t* eligible, int64_t n,
                                      TopKRule rule) {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < n; ++i)
        if (!eligible || eligible[i]) order.push_back(i);
    // Best first, equal scores in index order (a stable sort's order of the ascending indices).
    const auto before = [&](int64_t a, int64_t b) {
        return score[a] > score[b] || (score[a] == score[b] && a < b);
    };
    if (rule.threshold <= 0 && static_cast<size_t>(std::max<int64_t>(rule.k, 0)) < order.size()) {
        // Only the k best are kept: ordering those is enough (Elastic-Cache's tracked keys pick a
        // few of a sequence's keys at every layer of every step; a full sort was 2.6% of its run).
        const auto k = static_cast<std::ptrdiff_t>(std::max<int64_t>(rule.k, 0));
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        order.resize(static_cast<size_t>(k));
        return order;
    }
    std::sort(order.begin(), order.end(), before);
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

#include "sweep/frontier.h"

#include <algorithm>

namespace cl::sweep {

std::vector<size_t> pareto_front(const std::vector<FrontierInput>& points) {
    auto dominates = [](const FrontierInput& a, const FrontierInput& b) {
        return a.throughput >= b.throughput && a.accuracy >= b.accuracy &&
               (a.throughput > b.throughput || a.accuracy > b.accuracy);
    };
    std::vector<size_t> front;
    for (size_t i = 0; i < points.size(); ++i) {
        const bool beaten = std::any_of(points.begin(), points.end(), [&](const FrontierInput& q) {
            return dominates(q, points[i]);
        });
        if (!beaten) front.push_back(i);
    }
    std::stable_sort(front.begin(), front.end(), [&](size_t a, size_t b) {
        return points[a].throughput > points[b].throughput;
    });
    return front;
}

}  // namespace cl::sweep

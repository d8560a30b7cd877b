// The accuracy-vs-throughput frontier of a sweep: the points no other point beats on both
// (at least as accurate and at least as fast, better on one). Standard library only.
#pragma once

#include <cstddef>
#include <vector>

namespace cl::sweep {

struct FrontierInput {
    double throughput = 0;  // tokens/s (higher is better)
    double accuracy = 0;    // exact-match share (higher is better)
};

// Indices of the Pareto-optimal entries, by throughput descending. Ties (equal on both) are all
// kept, so the frontier does not depend on the order of the points.
std::vector<std::size_t> pareto_front(const std::vector<FrontierInput>& points);

}  // namespace cl::sweep

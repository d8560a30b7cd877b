// What the Pareto view draws: the points of a sweep results file with their metrics (filled by
// the app from cl_sweep; viz depends on no results format). Standard library only.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cl::viz {

struct ParetoPoint {
    std::string policy;
    std::map<std::string, double> params;
    double accuracy = 0, accuracy_lo = 0, accuracy_hi = 1;  // Wilson 95%
    double tokens_per_s = 0;
    double speedup = 0;     // against none on the same items (NaN without)
    bool frontier = false;  // Pareto-optimal over every point
};

struct ParetoData {
    std::string title;  // e.g. the results file and its spec's name
    std::vector<ParetoPoint> points;
};

}  // namespace cl::viz

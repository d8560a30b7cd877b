#include "engine/trace/accuracy_sweep.h"

#include <algorithm>

namespace cl::trace {

std::vector<std::pair<std::string, std::string>> AccuracySweep::series() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& p : points) {
        const std::pair<std::string, std::string> key{p.model, p.task};
        if (std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
    }
    return out;
}

}  // namespace cl::trace

#include "sweep/sweep_results.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace cl::sweep {

std::string utc_now() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string point_key(const std::string& model, const std::string& device,
                      const std::string& policy, const std::map<std::string, double>& params) {
    std::string key = model + "|" + device + "|" + policy + "|";
    bool first = true;
    for (const auto& [name, value] : params) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6g", value);
        key += (first ? "" : ",") + name + "=" + buf;
        first = false;
    }
    return key;
}

}  // namespace cl::sweep

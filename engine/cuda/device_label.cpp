#include <cstdio>

#include "engine/cuda/device_query.h"

namespace cl::cuda {

std::string DeviceInfo::label() const {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    char buf[64];
    std::snprintf(buf, sizeof buf, " (%.1f GiB, %.1f free)",
                  static_cast<double>(total_bytes) / kGiB, static_cast<double>(free_bytes) / kGiB);
    return "cuda:" + std::to_string(index) + "  " + name + buf;
}

uint64_t free_bytes(int index) {
    for (const auto& d : list_devices().devices)
        if (d.index == index) return d.free_bytes;
    return 0;
}

}  // namespace cl::cuda

// The CUDA runtime's view of the devices (names, memory, compute capability).
#include <cuda_runtime.h>

#include "engine/cuda/device_query.h"

namespace cl::cuda {

DeviceList list_devices() {
    DeviceList out;
    int count = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
        cudaGetLastError();  // clear it: a later call must not see it
        out.why_none = std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
        return out;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        DeviceInfo d;
        d.index = i;
        d.name = prop.name;
        d.total_bytes = prop.totalGlobalMem;
        d.major = prop.major;
        d.minor = prop.minor;
        int previous = 0;
        size_t free = 0, total = 0;
        if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(i) == cudaSuccess &&
            cudaMemGetInfo(&free, &total) == cudaSuccess)
            d.free_bytes = free;
        cudaSetDevice(previous);
        out.devices.push_back(d);
    }
    if (out.devices.empty()) out.why_none = "the CUDA runtime reports no device";
    return out;
}

bool kernels_built() {
    return true;
}

}  // namespace cl::cuda

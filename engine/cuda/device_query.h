// Which CUDA devices this process can use, for the app's Device selector and the CLI's errors.
// Asks the CUDA runtime directly (names and memory, which LibTorch's C++ API does not give); in a
// build without the CUDA toolkit it lists none and says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cl::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;           // "NVIDIA H100 80GB HBM3"
    uint64_t total_bytes = 0;   // device memory
    uint64_t free_bytes = 0;    // free when asked
    int major = 0, minor = 0;   // compute capability
    std::string label() const;  // "cuda:0  NVIDIA H100 80GB HBM3 (79.1 GiB, 78.5 free)"
};

struct DeviceList {
    std::vector<DeviceInfo> devices;
    std::string why_none;  // set when `devices` is empty: no toolkit in the build, no driver, ...
};

DeviceList list_devices();

// The free memory of CUDA device `index` now, as its runtime reports it; 0 where unknown (no such
// device, or none usable).
uint64_t free_bytes(int index);

// True when this build compiled the kernels of engine/cuda (the CUDA toolkit was found).
bool kernels_built();

}  // namespace cl::cuda

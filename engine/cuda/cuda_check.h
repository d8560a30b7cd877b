// For .cu files only: turns a CUDA error into an exception that names the call.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace cl::cuda {

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

// After a launch: a bad configuration is reported here, a fault in the kernel at the next sync.
inline void check_launch(const char* kernel) {
    check(cudaGetLastError(), kernel);
}

inline cudaStream_t native(void* stream) {
    return static_cast<cudaStream_t>(stream);
}

}  // namespace cl::cuda

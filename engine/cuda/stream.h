// What every kernel family's header shares: the stream type, kept free of CUDA's headers so that
// plain C++ (and the CPU-only build) can include the kernels' declarations.
#pragma once

namespace cl::cuda {

// A cudaStream_t; nullptr is the legacy default stream, which LibTorch's default stream also is.
using Stream = void*;

}  // namespace cl::cuda

// LibTorch's current stream on a tensor's device as the kernels' stream type, so that a kernel of
// engine/cuda runs after the work LibTorch queued before it, and LibTorch's next ops after it.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include "engine/cuda/stream.h"

namespace cl::detail {

// nullptr off a GPU (the CPU backend has no native stream handle; nothing there uses one).
inline cuda::Stream current_stream(torch::Device device) {
#if TORCH_VERSION_MAJOR >= 2  // Debian's LibTorch 1.13 has no CUDA (and no native_handle)
    if (!device.is_cuda()) return nullptr;
    return c10::impl::getDeviceGuardImpl(device.type())->getStream(device).native_handle();
#else
    (void)device;
    return nullptr;
#endif
}

inline cuda::Stream current_stream(const torch::Tensor& on) {
    return current_stream(on.device());
}

// Whether a tensor's reads run as engine/cuda kernels: it is on a CUDA device and this build has
// them and the fast kernels are chosen (kernel_choice.h; else the CPU references run on a host
// copy).
bool runs_on_kernels(const torch::Tensor& t);

}  // namespace cl::detail

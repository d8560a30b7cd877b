// Buffers that kernels fill: torch::empty without the dispatcher where the tensor is on the CPU.
#pragma once

#include <torch/types.h>

namespace cl::detail {

// An uninitialised tensor of these sizes and options, the same as torch::empty's (an inference
// tensor in inference mode). On the CPU it skips the dispatcher, whose code a cached step meets
// cold at every layer (the L3 is shared with the host's other guests), so a small buffer costs
// a fraction of torch::empty's time there. Elsewhere (another device, pinned memory, a tensor
// that requires grad) it is torch::empty.
torch::Tensor empty_buffer(at::IntArrayRef sizes, const torch::TensorOptions& options);

}  // namespace cl::detail

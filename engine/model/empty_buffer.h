// Buffers that kernels fill: torch::empty without the dispatcher where the tensor is on the CPU.
#pragma once

#include <torch/types.h>

namespace cl::detail {

// An uninitialised tensor of these sizes and options, the same as torch::empty's (an inference
// tensor in inference mode). On the CPU it skips the dispatcher, whose code a cached step meets
// cold at every layer (the L3 is shared with the host's other guests): in a scratch harness after
// a 2 MB pass, three (4, 22, 32) buffers took 0.9 us this way against 1.3-2.2 with torch::empty,
// and after a 64 MB pass 14-16 against 25-27. Elsewhere (another device, pinned memory, a tensor
// that requires grad) it is torch::empty.
torch::Tensor empty_buffer(at::IntArrayRef sizes, const torch::TensorOptions& options);

}  // namespace cl::detail

#include "engine/model/empty_buffer.h"

#include <ATen/EmptyTensor.h>

namespace cl::detail {

torch::Tensor empty_buffer(at::IntArrayRef sizes, const torch::TensorOptions& options) {
    if (options.device().is_cpu() && !options.pinned_memory() && !options.requires_grad() &&
        options.layout() == torch::kStrided)
        return at::detail::empty_cpu(sizes, options);
    return torch::empty(sizes, options);
}

}  // namespace cl::detail

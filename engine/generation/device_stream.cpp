#include "engine/generation/device_stream.h"

#include "engine/cuda/device_query.h"
#include "engine/kernels/kernel_choice.h"

namespace cl::detail {

bool runs_on_kernels(const torch::Tensor& t) {
    return t.is_cuda() && cuda::kernels_built() && fast_kernels();
}

}  // namespace cl::detail

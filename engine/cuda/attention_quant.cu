// One block per query row: pass 1 sums the heads of each column and reduces the positive row max,
// pass 2 sums again (cheaper than holding a row of any length in shared memory) and quantises.
#include "engine/cuda/attention_quant.h"
#include "engine/cuda/cuda_check.h"

namespace cl::cuda {
namespace {

constexpr int kThreads = 256;

// The sum over heads of probs[:, row, col], added in head order like the CPU reference.
__device__ float head_sum(const float* probs, int32_t heads, size_t plane, size_t at) {
    float s = probs[at];
    for (int32_t h = 1; h < heads; ++h)
        s = __fadd_rn(s, probs[static_cast<size_t>(h) * plane + at]);
    return s;
}

__global__ void head_mean_quantize_kernel(const float* probs, int32_t heads, int32_t rows,
                                          int32_t cols, uint8_t* levels, float* row_scale) {
    __shared__ float partial[kThreads];
    const size_t plane = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    const size_t first = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(cols);
    float mx = 0.f;  // NaN never wins a comparison, so it is skipped as on the CPU
    for (int32_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float s = head_sum(probs, heads, plane, first + c);
        mx = s > mx ? s : mx;
    }
    partial[threadIdx.x] = mx;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            const float other = partial[threadIdx.x + stride];
            if (other > partial[threadIdx.x]) partial[threadIdx.x] = other;
        }
        __syncthreads();
    }
    float row_max = partial[0];
    if (!(row_max < 3.4e38f)) row_max = 0.f;  // +inf: the row reads as 0
    if (threadIdx.x == 0) row_scale[blockIdx.x] = row_max / static_cast<float>(heads);
    const float k = row_max > 0.f ? 255.f / row_max : 0.f;
    for (int32_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float y = __fmul_rn(head_sum(probs, heads, plane, first + c), k);
        const float clamped = y > 0.f ? (y < 255.f ? y : 255.f) : 0.f;
        levels[first + c] = static_cast<uint8_t>(__fadd_rn(clamped, 0.5f));
    }
}

}  // namespace

void head_mean_quantize(const float* probs, int32_t heads, int32_t rows, int32_t cols,
                        uint8_t* levels, float* row_scale, Stream stream) {
    if (rows <= 0 || cols <= 0) return;
    head_mean_quantize_kernel<<<rows, kThreads, 0, native(stream)>>>(probs, heads < 1 ? 1 : heads,
                                                                     rows, cols, levels, row_scale);
    check_launch("head_mean_quantize");
}

}  // namespace cl::cuda

// Each thread ranks its entries by counting the eligible entries that beat them (higher score, or
// equal score and lower index): the rank a stable descending sort gives, with no sort at all.
// NaN scores compare false everywhere, as in the CPU reference's std::stable_sort... which leaves
// their order to the sort; keep scores finite (the engine's are probabilities and sums of them).
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/ranking.h"

namespace cl::cuda {
namespace {

constexpr int kThreads = 512;

__device__ bool beats(const double* score, int64_t j, int64_t i) {
    return score[j] > score[i] || (score[j] == score[i] && j < i);
}

__global__ void select_top_k_kernel(const double* score, const uint8_t* eligible, int64_t n,
                                    int64_t k, double threshold, uint8_t* chosen, int32_t* rank) {
    // Threshold rule: how many eligible scores reach it (the best entry is kept regardless).
    __shared__ int reaching;
    if (threadIdx.x == 0) reaching = 0;
    __syncthreads();
    if (threshold > 0) {
        int mine = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            mine += (!eligible || eligible[i]) && score[i] >= threshold;
        atomicAdd(&reaching, mine);
        __syncthreads();
    }
    const int64_t keep = threshold > 0 ? (reaching > 0 ? reaching : 1) : k;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const bool in = !eligible || eligible[i];
        int64_t r = 0;
        if (in)
            for (int64_t j = 0; j < n; ++j) r += (!eligible || eligible[j]) && beats(score, j, i);
        chosen[i] = in && r < keep;
        if (rank) rank[i] = in ? static_cast<int32_t>(r) : -1;
    }
}

}  // namespace

void select_top_k(const double* score, const uint8_t* eligible, int64_t n, TopKRule rule,
                  uint8_t* chosen, int32_t* rank, Stream stream) {
    if (n <= 0) return;
    select_top_k_kernel<<<1, kThreads, 0, native(stream)>>>(score, eligible, n, rule.k,
                                                            rule.threshold, chosen, rank);
    check_launch("select_top_k");
}

}  // namespace cl::cuda

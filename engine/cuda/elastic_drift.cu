// Elastic-Cache's tracking and drift test on the device. Head means repeat the CPU's float32 sums
// in head order and the window column sums its float64 sums in its order (exact); the drift sums
// reduce in a different order than the CPU's loop (equal to rounding, ~1e-15 relative).
#include <cmath>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/elastic_drift.h"

namespace cl::cuda {
namespace {

constexpr int kThreads = 256;

__device__ double head_mean(const float* probs, ProbsShape s, int64_t row, int64_t key) {
    float sum = 0.f;
    for (int64_t h = 0; h < s.heads; ++h)
        sum = __fadd_rn(sum, probs[(h * s.rows + row) * s.keys + key]);
    return static_cast<double>(__fdiv_rn(sum, static_cast<float>(s.heads)));
}

// grid (W), block kThreads: one window row per block.
__global__ void window_head_mean_kernel(const float* probs, ProbsShape s, const int32_t* rows,
                                        double* out) {
    const int64_t w = blockIdx.x;
    for (int64_t c = threadIdx.x; c < s.keys; c += blockDim.x)
        out[w * s.keys + c] = head_mean(probs, s, rows[w], c);
}

// One thread per key: window_column_sums_cpu's loops (kv head by kv head, each over its heads and
// the window rows in order), so the same bits.
__global__ void window_column_sums_kernel(const float* probs, ProbsShape s, int64_t kv_heads,
                                          const int32_t* rows, int64_t window,
                                          const uint8_t* excluded, double* column_sums) {
    const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= s.keys) return;
    if (excluded && excluded[c]) {
        column_sums[c] = -INFINITY;
        return;
    }
    const int64_t g = s.heads / kv_heads;
    double column = 0;
    for (int64_t n = 0; n < kv_heads; ++n) {
        double part = 0;
        for (int64_t h = n * g; h < (n + 1) * g; ++h)
            for (int64_t w = 0; w < window; ++w)
                part = __dadd_rn(part,
                                 static_cast<double>(probs[(h * s.rows + rows[w]) * s.keys + c]));
        column = __dadd_rn(column, part);
    }
    column_sums[c] = column;
}

// One block: each thread takes (w, t) pairs, then a shared-memory tree reduction of the three sums.
__global__ void drift_sums_kernel(const float* probs, ProbsShape s, const int32_t* rows_now,
                                  int64_t window, const double* prev_attn, const int64_t* tracked,
                                  int64_t n_tracked, double* sums, int32_t* shared) {
    __shared__ double part[3][kThreads];
    __shared__ int present;
    if (threadIdx.x == 0) present = 0;
    __syncthreads();
    double dot = 0, now_sq = 0, before_sq = 0;
    int mine = 0;
    for (int64_t pair = threadIdx.x; pair < window * n_tracked; pair += blockDim.x) {
        const int64_t w = pair / n_tracked, t = pair % n_tracked;
        if (rows_now[w] < 0) continue;
        mine += t == 0;
        const double now = head_mean(probs, s, rows_now[w], tracked[t]);
        const double before = prev_attn[w * s.keys + tracked[t]];
        dot += now * before;
        now_sq += now * now;
        before_sq += before * before;
    }
    part[0][threadIdx.x] = dot;
    part[1][threadIdx.x] = now_sq;
    part[2][threadIdx.x] = before_sq;
    if (mine) atomicAdd(&present, mine);
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            for (int q = 0; q < 3; ++q) part[q][threadIdx.x] += part[q][threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        for (int q = 0; q < 3; ++q) sums[q] = part[q][0];
        *shared = present;
    }
}

}  // namespace

void window_head_mean(const float* probs, ProbsShape s, const int32_t* rows, int64_t window,
                      double* out, Stream stream) {
    if (window <= 0 || s.keys <= 0) return;
    window_head_mean_kernel<<<static_cast<unsigned>(window), kThreads, 0, native(stream)>>>(
        probs, s, rows, out);
    check_launch("window_head_mean");
}

void window_column_sums(const float* probs, ProbsShape s, int64_t kv_heads, const int32_t* rows,
                        int64_t window, const uint8_t* excluded, double* column_sums,
                        Stream stream) {
    if (s.keys <= 0) return;
    const auto blocks = static_cast<unsigned>((s.keys + kThreads - 1) / kThreads);
    window_column_sums_kernel<<<blocks, kThreads, 0, native(stream)>>>(
        probs, s, kv_heads, rows, window, excluded, column_sums);
    check_launch("window_column_sums");
}

void drift_sums(const float* probs, ProbsShape s, const int32_t* rows_now, int64_t window,
                const double* prev_attn, const int64_t* tracked, int64_t n_tracked, double* sums,
                int32_t* shared, Stream stream) {
    drift_sums_kernel<<<1, kThreads, 0, native(stream)>>>(probs, s, rows_now, window, prev_attn,
                                                          tracked, n_tracked, sums, shared);
    check_launch("drift_sums");
}

}  // namespace cl::cuda

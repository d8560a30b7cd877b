// Elastic-Cache's reads of one layer's attention, where they live: on the CPU the references of
// engine/cuda/elastic_drift.h over the probabilities, or the attention's kept scores where it kept
// them instead (LayerResult::probs_mean_at and window_column_sums); on a CUDA tensor its kernels on
// LibTorch's current stream, so that a GPU run copies a few numbers per layer to the host (the
// tracked keys, the drift sums) instead of the (H, R, L) probabilities. Every path computes the
// same float operations in the same order (the kernels' tests check that they are exact).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "engine/cuda/elastic_drift.h"

namespace cl::policies::elastic {

// What one layer's attention leaves for the next step's drift test: the keys the window attends
// to most, and the window rows' head means at them.
struct WindowAttention {
    std::vector<int64_t> tracked;  // the n keys with the largest column sums over the window
    // (W, n) float64 row-major: window row w's head mean at tracked[t], at w * n + t. CPU runs.
    std::vector<double> before;
    // (W, L) float64 on the GPU: the window rows' whole head means, which the drift kernel reads
    // there. Undefined in CPU runs.
    torch::Tensor attn;
};

// One layer's attention as the policy gets it: the probabilities (H, R, L), or where the CPU
// attention kept its scores instead (LayerPlan::want_probs_mean), the head mean at one key of a
// kept row read from them and the window rows' column sums it summed. R: the rows kept
// (LayerResult::probs_positions).
struct AttentionReads {
    const torch::Tensor& probs;
    const std::function<double(int64_t, int64_t)>* mean_at = nullptr;
    const std::vector<double>* column_sums = nullptr;  // (L) or null
};

// rows (W) rows of the attention, excluded (L) keys never tracked (masked ones), kv_heads the
// model's (the column sums' order): the most-attended keys (top_attended_keys_cpu's ranking of
// window_column_sums_cpu's sums, or of the attention's own where given; none when W = 0) and the
// rows' head means at them.
WindowAttention window_attention(const AttentionReads& attention, const std::vector<int32_t>& rows,
                                 const std::vector<uint8_t>& excluded, int64_t n, int64_t kv_heads);

// The drift test's sums (cuda::drift_sums_tracked_cpu, or the drift kernel's): the attention now,
// rows_now (W) the row of each tracked window row in it or -1, prev the previous step's
// window_attention at this layer (its tracked keys and the head means there).
cuda::DriftSums drift_sums(const AttentionReads& attention, const std::vector<int32_t>& rows_now,
                           const WindowAttention& prev);

}  // namespace cl::policies::elastic

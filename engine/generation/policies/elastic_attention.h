// Elastic-Cache's reads of one layer's attention probabilities, where they live: on a CPU tensor
// the CPU references of engine/cuda/elastic_drift.h, on a CUDA tensor its kernels on LibTorch's
// current stream, so that a GPU run copies a few numbers per layer to the host (the tracked keys,
// the drift sums) instead of the (H, R, L) probabilities. Both paths compute the same float
// operations in the same order (the kernels' tests check that they are exact).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "engine/cuda/elastic_drift.h"

namespace cl::policies::elastic {

// What one layer's attention leaves for the next step's drift test: the window rows' head means
// and the keys they attend to most.
struct WindowAttention {
    // (W', L) float64 on probs' device: window row w's head mean is row attn_rows[w]. Where the
    // attention summed the means itself, the attention's own (P, L) tensor (no copy); elsewhere
    // (W, L) computed here, attn_rows[w] = w.
    torch::Tensor attn;
    std::vector<int32_t> attn_rows;  // (W)
    std::vector<int64_t> tracked;    // the n keys with the largest column sums over the window
};

// One layer's attention as the policy gets it: the probabilities (H, R, L), or where the CPU
// forward summed their head means (LayerPlan::want_probs_mean), those (R, L) float64, read in
// their place (at one thread the probabilities are then undefined). R: the rows kept
// (LayerResult::probs_positions).
struct AttentionReads {
    const torch::Tensor& probs;
    const torch::Tensor& means;
    // Where neither is there for the drift test (escalate at 2+ threads on the CPU): the means
    // read from the attention's kept scores (LayerResult::probs_mean_at), or null.
    const std::function<double(int64_t, int64_t)>* mean_at = nullptr;
};

// rows (W) rows of the attention, excluded (L) keys never tracked (masked ones): the head means
// (cuda::window_head_mean_cpu, or the attention's own with window_column_sums_cpu) and the
// most-attended keys (most_attended_keys_cpu's ranking; none when W = 0). On the CPU the column
// sums come out of the same pass, or, given column_sums (L), are those: the forward's sums of the
// same rows of the attention's means (LayerResult::mean_column_sums).
WindowAttention window_attention(const AttentionReads& attention, const std::vector<int32_t>& rows,
                                 const std::vector<uint8_t>& excluded, int64_t n,
                                 const std::vector<double>* column_sums = nullptr);

// The drift test's sums (cuda::drift_sums_cpu, or drift_sums_of_means_cpu): the attention now,
// rows_now (W) the row of each tracked window row in it or -1, prev the previous step's
// window_attention at this layer (its head means and tracked keys).
cuda::DriftSums drift_sums(const AttentionReads& attention, const std::vector<int32_t>& rows_now,
                           const WindowAttention& prev);

}  // namespace cl::policies::elastic

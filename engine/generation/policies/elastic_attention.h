// Elastic-Cache's reads of one layer's attention probabilities, where they live: on a CPU tensor
// the CPU references of engine/cuda/elastic_drift.h, on a CUDA tensor its kernels on LibTorch's
// current stream, so that a GPU run copies a few numbers per layer to the host (the tracked keys,
// the drift sums) instead of the (H, R, L) probabilities. Both paths compute the same float
// operations in the same order (the kernels' tests check that they are exact).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "engine/cuda/elastic_drift.h"

namespace cl::policies::elastic {

// probs (H, R, L), rows (W) rows of probs -> (W, L) float64 on probs' device: each row's head mean.
torch::Tensor window_head_mean(const torch::Tensor& probs, const std::vector<int32_t>& rows);

// The n keys with the largest column sums of attn (W, L), excluded (L) keys skipped, in ascending
// order (cuda::most_attended_keys_cpu).
std::vector<int64_t> most_attended_keys(const torch::Tensor& attn,
                                        const std::vector<uint8_t>& excluded, int64_t n);

// The drift test's sums (cuda::drift_sums_cpu): probs (H, R, L) now, rows_now (W) the row of each
// tracked window row in probs or -1, prev_attn (W, L) from window_head_mean, tracked the keys.
cuda::DriftSums drift_sums(const torch::Tensor& probs, const std::vector<int32_t>& rows_now,
                           const torch::Tensor& prev_attn, const std::vector<int64_t>& tracked);

}  // namespace cl::policies::elastic

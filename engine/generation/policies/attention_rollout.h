// d2Cache's attention rollout over one step's layers (its stage 2): influence = 1^T A_N ... A_1
// with A_l = (attn_l + I) / 2 on the rows layer l computed and the identity on the others, attn_l
// the head-mean attention (its rows already sum to 1), kept per layer in float64. On the CPU in
// float32 the head mean and the rollout are float64 loops over the probabilities (one pass each);
// elsewhere (a GPU, bf16) tensor ops on the attention's device, one copy of (L) to the host.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace cl::policies::rollout {

// One layer's attention as the rollout needs it.
struct LayerAttention {
    torch::Tensor rows;              // (R) int64 on the device; undefined = every row
    std::vector<int64_t> host_rows;  // (R); empty = every row
    torch::Tensor mean;              // (R, L) float64 head mean, on the attention's device
    bool by_loops = false;           // computed by the host loops (CPU float32 probabilities)
};

// probs (H, R, L) of the layer's computed rows (host_rows, empty = all) -> what the rollout keeps.
LayerAttention keep(const torch::Tensor& probs, const torch::Tensor& rows,
                    const std::vector<int64_t>& host_rows);

// The influence (L) of every position after the layers (first to last), on the host.
std::vector<double> influence(const std::vector<LayerAttention>& layers, int64_t L);

}  // namespace cl::policies::rollout

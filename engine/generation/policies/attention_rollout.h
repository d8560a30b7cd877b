// d2Cache's attention rollout over one step's layers (its stage 2): influence = 1^T A_N ... A_1
// with A_l = (attn_l + I) / 2 on the rows layer l computed and the identity on the others, attn_l
// the head-mean attention (its rows sum to 1 up to float32 rounding), which the layer's attention
// hands over in float32 (LayerPlan::want_head_mean: on the CPU summed in the attention's own
// pass). The rollout itself is float64: on the CPU a loop over the layers' means, each value
// widened; elsewhere (a GPU) tensor ops on the attention's device, one copy of (L) to the host.
// The loop stays on one thread: split over threads (a phase per layer, a share of the columns
// each), a barrier per layer costs more than d2Cache's (L) columns of work.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace cl::policies::rollout {

// One layer's attention as the rollout needs it.
struct LayerAttention {
    torch::Tensor rows;              // (R) int64 on the device; undefined = every row
    std::vector<int64_t> host_rows;  // (R); empty = every row
    torch::Tensor mean;              // (R, L) float32 head mean, on the attention's device
    bool by_loops = false;           // the rollout runs the host loops (a CPU mean)
};

// mean (R, L) float32, the head mean of the layer's computed rows (host_rows, empty = all) ->
// what the rollout keeps.
LayerAttention keep(const torch::Tensor& mean, const torch::Tensor& rows,
                    const std::vector<int64_t>& host_rows);

// The influence (L) of every position after the layers (first to last), on the host.
std::vector<double> influence(const std::vector<LayerAttention>& layers, int64_t L);

}  // namespace cl::policies::rollout

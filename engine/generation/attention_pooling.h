// The pooling of a layer's attention maps into tiles (trace/attention_detail.h) as tensor ops, so
// that it runs where the maps are: on a GPU the trace then copies (R', C') bytes instead of
// (H, R, L) floats. Reference: trace::AttentionMap::set_pooled_head_mean, the CPU loop the trace
// runs on the host, which this equals up to the order of the float sums (the test compares them).
// Internal: includes torch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "engine/trace/attention_detail.h"

namespace cl::detail {

// maps (H, R, L) at the computed query rows `positions` (R, ascending) -> (R', C') float32 means
// over each tile's heads, keys and computed rows, on maps' device; `first_positions` gets each
// stored row's first position (a multiple of detail.row_tile).
torch::Tensor pool_attention(const torch::Tensor& maps, const std::vector<int32_t>& positions,
                             trace::AttentionDetail detail, std::vector<int32_t>& first_positions);

}  // namespace cl::detail

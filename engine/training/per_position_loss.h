// The training loss's alignment of predictions with tokens, which differs by architecture: row i
// of the output predicts token i + logits_shift (LLaDA: 0; Dream, adapted from an autoregressive
// model: row i - 1 predicts token i). Internal to the trainer (includes torch).
#pragma once

#include <torch/torch.h>

namespace cl::detail {

// Cross-entropy of the model's prediction for every position: logits (B, L, V), ids (B, L) ->
// (B, L). The first `shift` positions (prompt tokens, never noised) have no prediction and get 0.
torch::Tensor per_position_ce(const torch::Tensor& logits, const torch::Tensor& ids, int shift);

}  // namespace cl::detail

// The sampler's per-step math on tensors (POLICIES.md section 1): Dream's top-p / top-k filters,
// Gumbel-max in float64 with counter-based noise, the confidence by the remasking algorithm
// (probability, margin, entropy or a random draw), and the inspector's top-k and entropy of the
// unfiltered prediction. Runs on the logits' device; the one host copy is of the small
// results at the end.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "engine/generation/generation_config.h"

namespace cl::detail {

struct Predictions {
    int64_t top_k = 0;
    std::vector<int32_t> token;        // (M) x0
    std::vector<double> confidence;    // (M) ranking score: probability of x0, top-1 - top-2
                                       // margin, minus the entropy, or the remasking draw
    std::vector<int32_t> topk_ids;     // (M, top_k)
    std::vector<double> topk_probs;    // (M, top_k) of the raw logits' softmax
    std::vector<double> entropy;       // (M) of the raw logits' softmax
    std::vector<double> current_prob;  // (M) probability of the position's current token (uniform
                                       // noise; empty otherwise)
};

struct SamplerInputs {
    const GenerationConfig* cfg = nullptr;
    int32_t step = 0;
    int32_t eos_id = -1;
    int32_t eot_id = -1;
    int64_t top_k = 5;
    int32_t suppress_id = -1;  // never predicted ([MASK] under uniform noise); -1 = none
    const std::vector<int32_t>* current = nullptr;  // (M) the positions' current tokens, to fill
                                                    // current_prob; null = not wanted
};

// logits (M, V) float32 on any device for `positions` (M) -> predictions on the host. On the CPU
// with argmax decoding and no filters, a pass per row (row_sampler.h); else the tensor ops below.
Predictions sample(const torch::Tensor& logits, const std::vector<int64_t>& positions,
                   const SamplerInputs& in);

// The same predictions by LibTorch ops on the logits' device, for every setting; the remasking
// draws of Random are left to sample(). The row path's reference in the tests.
Predictions sample_with_tensors(const torch::Tensor& logits, const std::vector<int64_t>& positions,
                                const SamplerInputs& in);

// The random-remasking confidence of (seed, step, position): a uniform draw in [0, 1) that does
// not depend on the forward, so the commit order is known before it (dKV-Cache-Greedy uses this).
double remask_uniform(uint64_t seed, int32_t step, int64_t position);

}  // namespace cl::detail

// The sampler's CPU fast path over one row of float32 logits, in float64 (POLICIES.md section 1):
// the row's maximum, its softmax normaliser and entropy, and its top-k logits in three passes over
// the row (widen with the maximum, exp, select). In LibTorch 1.13 ops the same results took a
// cast, two softmaxes (one of them log), a top-k, an argmax, a product, nan_to_num and a sum over
// (M, V) float64, a tenth or more of a cached step; this pass takes about a quarter of that
// (cachelens-bench-forward times both over 32 and 224 rows of logits).
// No torch here: sampler.cpp hands it the logits' memory, the test holds it against the tensor
// path.
#pragma once

#include <cstdint>

namespace cl::detail {

struct RowSummary {
    double max = 0.0;      // the largest logit (float64)
    double sum = 0.0;      // sum over the row of exp(logit - max): >= 1
    double entropy = 0.0;  // of softmax(row): log(sum) - sum_i p_i (logit_i - max)
    bool finite = false;   // no logit NaN or +inf (-inf is a logit of probability 0); else the
                           // rest is unset
};

// x (V) float32 logits -> row (V) float64 with the excluded ids (each -1 = none) at -inf, the
// summary, and top_ids (k, 1 <= k <= V) the ids of the k largest logits of row, largest first,
// equal logits by lower id. A NaN or +inf logit leaves finite false (the caller falls back
// to the tensor ops, which define what those rows give).
RowSummary summarize_row(const float* x, int64_t V, int32_t excluded_a, int32_t excluded_b,
                         int64_t k, double* row, int32_t* top_ids);

// softmax(row)[id] from the summary: exp(row[id] - max) / sum.
double probability_of(const RowSummary& s, double logit);

}  // namespace cl::detail

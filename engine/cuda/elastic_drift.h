// Elastic-Cache's attention-drift test and its window tracking. After each layer of a step the
// policy keeps the head-mean attention of the window's query rows and the keys they attend to most
// (tracking); at the next step, the cosine between the tracked columns now and then decides
// whether the layer and every deeper one is recomputed (the test). CPU references below are what
// the policy runs on the CPU (engine/generation/policies/elastic.cpp); the device versions keep
// the (H, R, L) probabilities on the GPU.
//
// probs: (heads, rows, keys) float32 row-major, one layer's attention probabilities.
// A head mean is the float32 sum over heads in head order divided by heads, then widened to double.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/cuda/stream.h"

namespace cl::cuda {

struct ProbsShape {
    int64_t heads = 1, rows = 0, keys = 0;
};

struct DriftSums {
    double dot = 0, now_sq = 0, before_sq = 0;
    bool shared = false;  // some window row is present in both steps
    // As torch::cosine_similarity (eps 1e-12): dot / sqrt(max(now_sq * before_sq, eps^2)).
    double cosine() const;
};

// ---- CPU references -----------------------------------------------------------------------------

// out (W, keys) float64: the head mean of probs row rows[w], for each w. rows[w] must be valid.
// With column_sums (keys): also each key's sum of out over w from 0.0 in window order, the sums
// most_attended_keys_cpu ranks (the same bits), in the same pass.
void window_head_mean_cpu(const float* probs, ProbsShape s, const int32_t* rows, int64_t window,
                          double* out, double* column_sums = nullptr);

// window_head_mean_cpu's column_sums where the head means are at hand already: means (rows, keys)
// float64 the head means of the attention's rows (the CPU attention sums them in its own pass:
// engine/model/row_attention.h, HeadMeanSums::Float32), summed over the window rows rows[w]. The
// means themselves are not copied: Elastic-Cache keeps the attention's tensor for the next step
// (a copy of the window's rows and its allocation were 2.8% of a cached step).
void window_column_sums_cpu(const double* means, int64_t keys, const int32_t* rows, int64_t window,
                            double* column_sums);

// window_column_sums_cpu's sums of the keys [k0, k1) only (column_sums (keys), the others left as
// they are): the same bits, a share of the keys per thread (a key's sum reads only its column).
void window_column_sums_keys_cpu(const double* means, int64_t keys, const int32_t* rows,
                                 int64_t window, int64_t k0, int64_t k1, double* column_sums);

// The n keys with the largest column sum over the window's rows of attn (W, keys), excluded keys
// (masked ones) skipped; ties to the lower key (select_top_k_cpu). Returned in ascending key order.
std::vector<int64_t> most_attended_keys_cpu(const double* attn, int64_t window, int64_t keys,
                                            const uint8_t* excluded, int64_t n);

// most_attended_keys_cpu's ranking of given column_sums (keys): the n largest of the keys not
// excluded, in ascending key order.
std::vector<int64_t> top_attended_keys_cpu(const double* column_sums, int64_t keys,
                                           const uint8_t* excluded, int64_t n);

// The drift test's sums over the previous window rows still present now (rows_now[w] >= 0: their
// row in probs) and the tracked keys: now = head mean of probs, before = prev_attn (W, keys), or
// with prev_rows (W) window row w's values at row prev_rows[w] of prev_attn.
DriftSums drift_sums_cpu(const float* probs, ProbsShape s, const int32_t* rows_now, int64_t window,
                         const double* prev_attn, const int64_t* tracked, int64_t n_tracked,
                         const int32_t* prev_rows = nullptr);

// drift_sums_cpu where the head means (rows, keys) float64 are at hand (window_column_sums_cpu's).
DriftSums drift_sums_of_means_cpu(const double* means, int64_t keys, const int32_t* rows_now,
                                  int64_t window, const double* prev_attn, const int64_t* tracked,
                                  int64_t n_tracked, const int32_t* prev_rows = nullptr);

// drift_sums_cpu with now(row, key) read wherever this step's head means are (the CPU attention's
// kept scores, LayerResult::probs_mean_at): keys, the attention's L.
DriftSums drift_sums_at_cpu(const std::function<double(int64_t row, int64_t key)>& now,
                            int64_t keys, const int32_t* rows_now, int64_t window,
                            const double* prev_attn, const int64_t* tracked, int64_t n_tracked,
                            const int32_t* prev_rows = nullptr);

// ---- On the device (every pointer on the device) --------------------------------------------

void window_head_mean(const float* probs, ProbsShape s, const int32_t* rows, int64_t window,
                      double* out, Stream stream);

// column_sums (keys) float64: the sum over w of attn[w, key] in window order; excluded keys get
// -inf so that select_top_k(column_sums, not excluded, n) ranks them out.
void attention_column_sums(const double* attn, int64_t window, int64_t keys,
                           const uint8_t* excluded, double* column_sums, Stream stream);

// sums (3) float64: dot, now_sq, before_sq; shared (1) int32: the count of rows present in both.
void drift_sums(const float* probs, ProbsShape s, const int32_t* rows_now, int64_t window,
                const double* prev_attn, const int64_t* tracked, int64_t n_tracked, double* sums,
                int32_t* shared, Stream stream);

}  // namespace cl::cuda

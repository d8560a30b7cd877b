// Elastic-Cache's attention-drift test and its window tracking. After each layer of a step the
// policy keeps the keys the window's query rows attend to most (tracking) and the rows' head-mean
// attention to them; at the next step, the cosine between the tracked columns now and then decides
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

// One head mean: probs row `row` at `key` (the definition above).
double head_mean_cpu(const float* probs, ProbsShape s, int64_t row, int64_t key);

// out (W, keys) float64: the head mean of probs row rows[w], for each w. rows[w] must be valid.
void window_head_mean_cpu(const float* probs, ProbsShape s, const int32_t* rows, int64_t window,
                          double* out);

// column_sums (keys) float64: how much the window's rows rows[w] attend to each key, the sums
// Elastic-Cache ranks its tracked keys by. Per key, kv head by kv head in order, each kv head's
// probabilities (its heads in head order, each over the window rows in window order) widened and
// summed in float64 from 0.0, then the kv heads' sums added from 0.0 in kv head order. So a
// thread that ran a kv head's attention sums that kv head's part from its own scores
// (engine/kernels/row_attention.h, column_window_sums) and only the kv heads' (keys) sums cross
// threads: summing the window's float32 head means instead read every head of every window row
// at every key, a layer's worth from the other core's cache (docs/architecture.md, "The cached
// step on the CPU"). heads / kv_heads query heads share a kv head, kv_heads divides heads.
void window_column_sums_cpu(const float* probs, ProbsShape s, int64_t kv_heads, const int32_t* rows,
                            int64_t window, double* column_sums);

// The n keys with the largest column sum over the window's rows of attn (W, keys), excluded keys
// (masked ones) skipped; ties to the lower key (select_top_k_cpu). Returned in ascending key order.
std::vector<int64_t> most_attended_keys_cpu(const double* attn, int64_t window, int64_t keys,
                                            const uint8_t* excluded, int64_t n);

// most_attended_keys_cpu's ranking of given column_sums (keys): the n largest of the keys not
// excluded, in ascending key order.
std::vector<int64_t> top_attended_keys_cpu(const double* column_sums, int64_t keys,
                                           const uint8_t* excluded, int64_t n);

// The drift test's sums over the previous window rows still present now (rows_now[w] >= 0: their
// row in probs) and the tracked keys: now = head mean of probs, before = prev_attn (W, keys).
DriftSums drift_sums_cpu(const float* probs, ProbsShape s, const int32_t* rows_now, int64_t window,
                         const double* prev_attn, const int64_t* tracked, int64_t n_tracked);

// drift_sums_cpu's sums (the same order) with now(row, key) read wherever this step's head means
// are (the probabilities, or the CPU attention's kept scores: LayerResult::probs_mean_at) and
// before (W, n_tracked) window row w's head mean at tracked[t] the step before, at w * n + t.
DriftSums drift_sums_tracked_cpu(const std::function<double(int64_t row, int64_t key)>& now,
                                 const int32_t* rows_now, int64_t window, const double* before,
                                 const int64_t* tracked, int64_t n_tracked);

// ---- On the device (every pointer on the device) --------------------------------------------

void window_head_mean(const float* probs, ProbsShape s, const int32_t* rows, int64_t window,
                      double* out, Stream stream);

// column_sums (keys) float64: window_column_sums_cpu's sums (the same bits); excluded keys get
// -inf so that select_top_k(column_sums, not excluded, n) ranks them out.
void window_column_sums(const float* probs, ProbsShape s, int64_t kv_heads, const int32_t* rows,
                        int64_t window, const uint8_t* excluded, double* column_sums,
                        Stream stream);

// sums (3) float64: dot, now_sq, before_sq; shared (1) int32: the count of rows present in both.
void drift_sums(const float* probs, ProbsShape s, const int32_t* rows_now, int64_t window,
                const double* prev_attn, const int64_t* tracked, int64_t n_tracked, double* sums,
                int32_t* shared, Stream stream);

}  // namespace cl::cuda

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/base/cpu_clones.h"
#include "engine/cuda/elastic_drift.h"

namespace cl::cuda {
namespace {

double head_mean(const float* probs, ProbsShape s, int64_t row, int64_t key) {
    float sum = 0.f;
    for (int64_t h = 0; h < s.heads; ++h) sum += probs[(h * s.rows + row) * s.keys + key];
    return static_cast<double>(sum / static_cast<float>(s.heads));
}

}  // namespace

double DriftSums::cosine() const {
    return dot / std::sqrt(std::max(now_sq * before_sq, 1e-24));
}

namespace {

// column_sums (keys) += row (keys), the window's next row.
CL_CPU_CLONES void add_to_column_sums(const double* __restrict row, int64_t keys,
                                      double* __restrict column_sums) {
    for (int64_t c = 0; c < keys; ++c) column_sums[c] += row[c];
}

// One window row's head mean: sum (keys) float32 scratch, out (keys) the mean, and where
// column_sums is given, each key's mean added to it. Cloned per instruction set: every step is
// exact per lane (float sums in head order, one division, a widening, a float64 sum in window
// order), so every width gives the same bits.
CL_CPU_CLONES void head_mean_row(const float* __restrict probs, ProbsShape s, int32_t row,
                                 float* __restrict sum, double* __restrict out,
                                 double* __restrict column_sums) {
    std::fill(sum, sum + s.keys, 0.0F);
    for (int64_t h = 0; h < s.heads; ++h) {
        const float* __restrict p = probs + (h * s.rows + row) * s.keys;
        for (int64_t c = 0; c < s.keys; ++c) sum[c] += p[c];
    }
    const auto heads = static_cast<float>(s.heads);
    for (int64_t c = 0; c < s.keys; ++c) out[c] = static_cast<double>(sum[c] / heads);
    if (column_sums) add_to_column_sums(out, s.keys, column_sums);
}

}  // namespace

// head_mean's sums, a row of keys at a time (the heads in the same order) so that the loops run
// along contiguous keys: key by key, striding across the heads, it was 2.4% of an Elastic-Cache
// run's cached steps. With the column sums in the same pass and the loops cloned, this and the
// ranking take 3.9 + 0.6 us a layer where the SSE2 head means and most_attended_keys_cpu's strided
// column sums took 5.8 (16 window rows, 4 heads, 439 keys, AVX-512).
void window_head_mean_cpu(const float* probs, ProbsShape s, const int32_t* rows, int64_t window,
                          double* out, double* column_sums) {
    std::vector<float> sum(static_cast<size_t>(s.keys));  // (keys)
    if (column_sums) std::fill(column_sums, column_sums + s.keys, 0.0);
    for (int64_t w = 0; w < window; ++w)
        head_mean_row(probs, s, rows[w], sum.data(), out + w * s.keys, column_sums);
}

void window_column_sums_cpu(const double* means, int64_t keys, const int32_t* rows, int64_t window,
                            double* column_sums) {
    window_column_sums_keys_cpu(means, keys, rows, window, 0, keys, column_sums);
}

void window_column_sums_keys_cpu(const double* means, int64_t keys, const int32_t* rows,
                                 int64_t window, int64_t k0, int64_t k1, double* column_sums) {
    std::fill(column_sums + k0, column_sums + k1, 0.0);
    for (int64_t w = 0; w < window; ++w)
        add_to_column_sums(means + static_cast<int64_t>(rows[w]) * keys + k0, k1 - k0,
                           column_sums + k0);
}

std::vector<int64_t> top_attended_keys_cpu(const double* column_sums, int64_t keys,
                                           const uint8_t* excluded, int64_t n) {
    // select_top_k_cpu's choice in one pass over the keys, the best n so far kept in rank order:
    // n is a handful (track_num, at most 16) where the keys are hundreds, and this runs at every
    // layer of every cached step. Copying the eligibility and ranking every key took 1.9-2.4 us a
    // layer (16 window rows, about 340 keys, AVX-512), about 1% of a cached layer.
    const auto limit = static_cast<size_t>(std::max<int64_t>(n, 0));
    std::vector<int64_t> best;  // rank order: larger sum first, ties to the lower key
    best.reserve(limit);
    for (int64_t i = 0; i < keys && limit > 0; ++i) {
        if (excluded && excluded[i]) continue;
        // Keys come in ascending order, so an equal sum ranks after every key already kept.
        if (best.size() == limit && !(column_sums[i] > column_sums[best.back()])) continue;
        if (best.size() == limit) best.pop_back();
        auto at = best.end();
        while (at != best.begin() && column_sums[i] > column_sums[*(at - 1)]) --at;
        best.insert(at, i);
    }
    std::sort(best.begin(), best.end());
    return best;
}

std::vector<int64_t> most_attended_keys_cpu(const double* attn, int64_t window, int64_t keys,
                                            const uint8_t* excluded, int64_t n) {
    std::vector<double> column(static_cast<size_t>(keys), 0.0);
    for (int64_t i = 0; i < keys; ++i) {
        if (excluded && excluded[i]) continue;  // ranked out by top_attended_keys_cpu
        for (int64_t w = 0; w < window; ++w) column[static_cast<size_t>(i)] += attn[w * keys + i];
    }
    return top_attended_keys_cpu(column.data(), keys, excluded, n);
}

namespace {

// The drift sums with now(row, key) the head mean of a row of this step's attention.
template <class Now>
DriftSums drift_sums_of(const Now& now_at, int64_t keys, const int32_t* rows_now, int64_t window,
                        const double* prev_attn, const int32_t* prev_rows, const int64_t* tracked,
                        int64_t n_tracked) {
    DriftSums out;
    for (int64_t w = 0; w < window; ++w) {
        if (rows_now[w] < 0) continue;
        out.shared = true;
        const double* prev = prev_attn + (prev_rows ? prev_rows[w] : w) * keys;
        for (int64_t t = 0; t < n_tracked; ++t) {
            const double now = now_at(rows_now[w], tracked[t]);
            const double before = prev[tracked[t]];
            out.dot += now * before;
            out.now_sq += now * now;
            out.before_sq += before * before;
        }
    }
    return out;
}

}  // namespace

DriftSums drift_sums_cpu(const float* probs, ProbsShape s, const int32_t* rows_now, int64_t window,
                         const double* prev_attn, const int64_t* tracked, int64_t n_tracked,
                         const int32_t* prev_rows) {
    const auto now = [&](int32_t row, int64_t key) { return head_mean(probs, s, row, key); };
    return drift_sums_of(now, s.keys, rows_now, window, prev_attn, prev_rows, tracked, n_tracked);
}

DriftSums drift_sums_of_means_cpu(const double* means, int64_t keys, const int32_t* rows_now,
                                  int64_t window, const double* prev_attn, const int64_t* tracked,
                                  int64_t n_tracked, const int32_t* prev_rows) {
    const auto now = [&](int32_t row, int64_t key) {
        return means[static_cast<int64_t>(row) * keys + key];
    };
    return drift_sums_of(now, keys, rows_now, window, prev_attn, prev_rows, tracked, n_tracked);
}

DriftSums drift_sums_at_cpu(const std::function<double(int64_t row, int64_t key)>& now,
                            int64_t keys, const int32_t* rows_now, int64_t window,
                            const double* prev_attn, const int64_t* tracked, int64_t n_tracked,
                            const int32_t* prev_rows) {
    return drift_sums_of(now, keys, rows_now, window, prev_attn, prev_rows, tracked, n_tracked);
}

}  // namespace cl::cuda

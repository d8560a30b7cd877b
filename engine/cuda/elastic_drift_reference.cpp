#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/base/cpu_clones.h"
#include "engine/cuda/elastic_drift.h"

namespace cl::cuda {

double head_mean_cpu(const float* probs, ProbsShape s, int64_t row, int64_t key) {
    float sum = 0.f;
    for (int64_t h = 0; h < s.heads; ++h) sum += probs[(h * s.rows + row) * s.keys + key];
    return static_cast<double>(sum / static_cast<float>(s.heads));
}

double DriftSums::cosine() const {
    return dot / std::sqrt(std::max(now_sq * before_sq, 1e-24));
}

namespace {

// One window row's head mean: sum (keys) float32 scratch, out (keys) the mean. Cloned per
// instruction set: every step is exact per lane (float sums in head order, one division, a
// widening), so every width gives the same bits.
CL_CPU_CLONES void head_mean_row(const float* __restrict probs, ProbsShape s, int32_t row,
                                 float* __restrict sum, double* __restrict out) {
    std::fill(sum, sum + s.keys, 0.0F);
    for (int64_t h = 0; h < s.heads; ++h) {
        const float* __restrict p = probs + (h * s.rows + row) * s.keys;
        for (int64_t c = 0; c < s.keys; ++c) sum[c] += p[c];
    }
    const auto heads = static_cast<float>(s.heads);
    for (int64_t c = 0; c < s.keys; ++c) out[c] = static_cast<double>(sum[c] / heads);
}

// sums (keys) += each key's probability in probs row p (keys), widened: one window row of one head.
CL_CPU_CLONES void add_widened(const float* __restrict p, int64_t keys, double* __restrict sums) {
    for (int64_t c = 0; c < keys; ++c) sums[c] += static_cast<double>(p[c]);
}

}  // namespace

// head_mean's sums a row of keys at a time (the heads in the same order), so that the loops run
// along contiguous keys.
void window_head_mean_cpu(const float* probs, ProbsShape s, const int32_t* rows, int64_t window,
                          double* out) {
    std::vector<float> sum(static_cast<size_t>(s.keys));  // (keys)
    for (int64_t w = 0; w < window; ++w)
        head_mean_row(probs, s, rows[w], sum.data(), out + w * s.keys);
}

void window_column_sums_cpu(const float* probs, ProbsShape s, int64_t kv_heads, const int32_t* rows,
                            int64_t window, double* column_sums) {
    const int64_t g = s.heads / kv_heads;
    std::vector<double> part(static_cast<size_t>(s.keys));  // (keys) one kv head's sums
    std::fill(column_sums, column_sums + s.keys, 0.0);
    for (int64_t n = 0; n < kv_heads; ++n) {
        std::fill(part.begin(), part.end(), 0.0);
        for (int64_t h = n * g; h < (n + 1) * g; ++h)
            for (int64_t w = 0; w < window; ++w)
                add_widened(probs + (h * s.rows + rows[w]) * s.keys, s.keys, part.data());
        for (int64_t c = 0; c < s.keys; ++c) column_sums[c] += part[static_cast<size_t>(c)];
    }
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

// The drift sums over the window rows present now and the tracked keys: now(row, key) this step's
// head mean, before(w, t) window row w's at tracked[t] the step before.
template <class Now, class Before>
DriftSums drift_sums_of(const Now& now_at, const Before& before_at, const int32_t* rows_now,
                        int64_t window, const int64_t* tracked, int64_t n_tracked) {
    DriftSums out;
    for (int64_t w = 0; w < window; ++w) {
        if (rows_now[w] < 0) continue;
        out.shared = true;
        for (int64_t t = 0; t < n_tracked; ++t) {
            const double now = now_at(rows_now[w], tracked[t]);
            const double before = before_at(w, t);
            out.dot += now * before;
            out.now_sq += now * now;
            out.before_sq += before * before;
        }
    }
    return out;
}

}  // namespace

DriftSums drift_sums_cpu(const float* probs, ProbsShape s, const int32_t* rows_now, int64_t window,
                         const double* prev_attn, const int64_t* tracked, int64_t n_tracked) {
    const auto now = [&](int32_t row, int64_t key) { return head_mean_cpu(probs, s, row, key); };
    const auto before = [&](int64_t w, int64_t t) { return prev_attn[w * s.keys + tracked[t]]; };
    return drift_sums_of(now, before, rows_now, window, tracked, n_tracked);
}

DriftSums drift_sums_tracked_cpu(const std::function<double(int64_t row, int64_t key)>& now,
                                 const int32_t* rows_now, int64_t window, const double* before,
                                 const int64_t* tracked, int64_t n_tracked) {
    const auto before_at = [&](int64_t w, int64_t t) { return before[w * n_tracked + t]; };
    return drift_sums_of(now, before_at, rows_now, window, tracked, n_tracked);
}

}  // namespace cl::cuda

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cuda/elastic_drift.h"
#include "engine/cuda/ranking.h"

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

// head_mean's sums, a row of keys at a time (the heads in the same order) so that the loops run
// along contiguous keys: key by key, striding across the heads, it was 2.4% of an Elastic-Cache
// run's cached steps.
void window_head_mean_cpu(const float* probs, ProbsShape s, const int32_t* rows, int64_t window,
                          double* out) {
    std::vector<float> sum(static_cast<size_t>(s.keys));  // (keys)
    for (int64_t w = 0; w < window; ++w) {
        std::fill(sum.begin(), sum.end(), 0.0F);
        for (int64_t h = 0; h < s.heads; ++h) {
            const float* p = probs + (h * s.rows + rows[w]) * s.keys;
            for (int64_t c = 0; c < s.keys; ++c) sum[static_cast<size_t>(c)] += p[c];
        }
        for (int64_t c = 0; c < s.keys; ++c)
            out[w * s.keys + c] =
                static_cast<double>(sum[static_cast<size_t>(c)] / static_cast<float>(s.heads));
    }
}

std::vector<int64_t> most_attended_keys_cpu(const double* attn, int64_t window, int64_t keys,
                                            const uint8_t* excluded, int64_t n) {
    std::vector<double> column(static_cast<size_t>(keys), 0.0);
    std::vector<uint8_t> eligible(static_cast<size_t>(keys), 1);
    for (int64_t i = 0; i < keys; ++i) {
        if (excluded && excluded[i]) {
            eligible[static_cast<size_t>(i)] = 0;
            continue;
        }
        for (int64_t w = 0; w < window; ++w) column[static_cast<size_t>(i)] += attn[w * keys + i];
    }
    auto chosen = select_top_k_cpu(column.data(), eligible.data(), keys, {.k = n});
    std::sort(chosen.begin(), chosen.end());
    return chosen;
}

DriftSums drift_sums_cpu(const float* probs, ProbsShape s, const int32_t* rows_now, int64_t window,
                         const double* prev_attn, const int64_t* tracked, int64_t n_tracked) {
    DriftSums out;
    for (int64_t w = 0; w < window; ++w) {
        if (rows_now[w] < 0) continue;
        out.shared = true;
        for (int64_t t = 0; t < n_tracked; ++t) {
            const double now = head_mean(probs, s, rows_now[w], tracked[t]);
            const double before = prev_attn[w * s.keys + tracked[t]];
            out.dot += now * before;
            out.now_sq += now * now;
            out.before_sq += before * before;
        }
    }
    return out;
}

}  // namespace cl::cuda

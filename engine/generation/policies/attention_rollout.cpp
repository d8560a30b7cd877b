#include "engine/generation/policies/attention_rollout.h"

#include "engine/base/cpu_clones.h"
#include "engine/model/blocks.h"

#include <algorithm>

namespace cl::policies::rollout {
namespace {

// Probabilities read per task of the head mean: fewer are not worth a thread.
constexpr int64_t kFloatsPerTask = 32768;

// out[j] += c * p[j] over a row of L (vectorises: no aliasing).
CL_CPU_CLONES void add_scaled_row(double c, const double* __restrict p, int64_t L,
                                  double* __restrict out) {
    for (int64_t j = 0; j < L; ++j) out[j] += c * p[j];
}

// p (H, R, L) float32 -> m (R, L) float64 head mean. Each output row is built while it sits in
// L1: the first head's row widened, the others added in head order, then divided by H (the bits
// of a sum from 0.0 over the heads, then the division). Cloned per instruction set: at SSE2's two
// doubles per instruction the divisions alone were 8% of a d2cache step (4 x 80 x 594: 72 to 33
// us). Rows [r0, r1) of m.
CL_CPU_CLONES void head_mean_rows(const float* __restrict p, int64_t H, int64_t R, int64_t L,
                                  int64_t r0, int64_t r1, double* __restrict m) {
    const auto heads = static_cast<double>(H);
    // A power of two's reciprocal is exact, so x * (1 / H) has x / H's bits; the divisions were
    // half of this loop's time (H = 4, d2cache's 65 x 439 rows).
    const bool exact_reciprocal = H > 0 && (H & (H - 1)) == 0;
    const double reciprocal = 1.0 / heads;
    for (int64_t r = r0; r < r1; ++r) {
        double* __restrict out = m + r * L;
        const float* __restrict first = p + r * L;
        for (int64_t j = 0; j < L; ++j) out[j] = static_cast<double>(first[j]);
        for (int64_t h = 1; h < H; ++h) {
            const float* __restrict head = p + (h * R + r) * L;
            for (int64_t j = 0; j < L; ++j) out[j] += static_cast<double>(head[j]);
        }
        if (exact_reciprocal)
            for (int64_t j = 0; j < L; ++j) out[j] *= reciprocal;
        else
            for (int64_t j = 0; j < L; ++j) out[j] /= heads;
    }
}

// probs (H, R, L) float32 -> (R, L) float64 head mean in one pass, where LibTorch took a float32
// mean and a float64 copy (with the rollout's product, d2cache's costliest per-step calls in a
// torch profile of its cached steps).
torch::Tensor head_mean_by_loops(const torch::Tensor& probs) {
    const int64_t H = probs.size(0), R = probs.size(1), L = probs.size(2);
    auto mean = torch::empty({R, L}, torch::TensorOptions().dtype(torch::kFloat64));  // (R, L)
    // Rows split over the threads (4% of a d2cache step on one core; at 2 threads the other core
    // waited for the main thread's: split, d2cache ran 2.7% faster, paired steps).
    const int64_t rows_per_task =
        std::max<int64_t>(1, kFloatsPerTask / std::max<int64_t>(H * L, 1));
    at::parallel_for(0, R, rows_per_task, [&](int64_t begin, int64_t end) {
        head_mean_rows(probs.data_ptr<float>(), H, R, L, begin, end, mean.data_ptr<double>());
    });
    return mean;
}

// The rollout in float64 loops over the layers' head means.
std::vector<double> influence_by_loops(const std::vector<LayerAttention>& layers, int64_t L) {
    std::vector<double> v(static_cast<size_t>(L), 1.0), next;  // (L)
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
        const int64_t R = it->mean.size(0);
        const auto position = [&](int64_t r) {  // of attention row r
            return static_cast<size_t>(
                it->host_rows.empty() ? r : it->host_rows[static_cast<size_t>(r)]);
        };
        next = v;
        for (int64_t r = 0; r < R; ++r) next[position(r)] = 0.5 * v[position(r)];  // the +I half
        const double* mean = it->mean.data_ptr<double>();
        for (int64_t r = 0; r < R; ++r)
            add_scaled_row(0.5 * v[position(r)], mean + r * L, L, next.data());
        v.swap(next);
    }
    return v;
}

// On the attention's device: one copy of (L) doubles to the host per step.
std::vector<double> influence_on_device(const std::vector<LayerAttention>& layers, int64_t L) {
    const auto on = layers.front().mean.options();  // float64 on the model's device
    auto v = torch::ones({L}, on);                  // (L)
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
        const auto& attn = it->mean;  // (R, L)
        auto active = it->rows.defined() ? it->rows : torch::arange(L, on.dtype(torch::kLong));
        auto v_active = v.index_select(0, active);  // (R)
        auto next = v.clone();
        next.index_put_({active}, v_active * 0.5);  // the +I half of active rows
        next += 0.5 * torch::matmul(v_active.unsqueeze(0), attn).squeeze(0);
        v = next;
    }
    auto acc = v.to(torch::kCPU).contiguous();  // (L)
    const double* a = acc.data_ptr<double>();
    return {a, a + L};
}

}  // namespace

LayerAttention keep(const torch::Tensor& probs, const torch::Tensor& rows,
                    const std::vector<int64_t>& host_rows) {
    LayerAttention a;
    a.rows = rows;
    a.host_rows = host_rows;
    a.by_loops = detail::uses_row_kernels(probs) && probs.dim() == 3;
    a.mean = a.by_loops ? head_mean_by_loops(probs.contiguous())
                        : probs.mean(0).to(torch::kFloat64);  // (R, L) on the model's device
    return a;
}

std::vector<double> influence(const std::vector<LayerAttention>& layers, int64_t L) {
    const bool by_loops = std::all_of(layers.begin(), layers.end(),
                                      [](const LayerAttention& a) { return a.by_loops; });
    return by_loops ? influence_by_loops(layers, L) : influence_on_device(layers, L);
}

}  // namespace cl::policies::rollout

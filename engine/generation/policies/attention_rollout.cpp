#include "engine/generation/policies/attention_rollout.h"

#include <algorithm>

namespace cl::policies::rollout {
namespace {

// out[j] += c * p[j]: one attention row's share of the rollout (vectorises: no aliasing).
void add_scaled_row(double c, const float* __restrict p, int64_t L, double* __restrict out) {
    for (int64_t j = 0; j < L; ++j) out[j] += c * static_cast<double>(p[j]);
}

// In float64 loops over the float32 probabilities, one pass over (H, R, L) per layer, where the
// tensor ops took a mean, a float64 copy and a product per layer (d2cache's costliest per-step
// calls in a torch profile of its cached steps).
std::vector<double> influence_on_host(const std::vector<LayerAttention>& layers, int64_t L) {
    std::vector<double> v(static_cast<size_t>(L), 1.0), next;  // (L)
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
        const int64_t H = it->probs.size(0), R = it->probs.size(1);
        const auto position = [&](int64_t r) {  // of attention row r
            return static_cast<size_t>(
                it->host_rows.empty() ? r : it->host_rows[static_cast<size_t>(r)]);
        };
        next = v;
        for (int64_t r = 0; r < R; ++r) next[position(r)] = 0.5 * v[position(r)];  // the +I half
        const float* p = it->probs.data_ptr<float>();
        for (int64_t h = 0; h < H; ++h)
            for (int64_t r = 0; r < R; ++r)
                add_scaled_row(0.5 * v[position(r)] / static_cast<double>(H), p + (h * R + r) * L,
                               L, next.data());
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
    if (probs.device().is_cpu() && probs.scalar_type() == torch::kFloat32 && probs.dim() == 3)
        a.probs = probs.contiguous();  // (H, R, L)
    else
        a.mean = probs.mean(0).to(torch::kFloat64);  // (R, L) on the model's device
    return a;
}

std::vector<double> influence(const std::vector<LayerAttention>& layers, int64_t L) {
    const bool on_host = std::all_of(layers.begin(), layers.end(),
                                     [](const LayerAttention& a) { return a.probs.defined(); });
    return on_host ? influence_on_host(layers, L) : influence_on_device(layers, L);
}

}  // namespace cl::policies::rollout

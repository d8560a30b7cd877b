#include "engine/generation/policies/attention_rollout.h"

#include "engine/base/cpu_clones.h"
#include "engine/kernels/kernel_choice.h"

#include <algorithm>

namespace cl::policies::rollout {
namespace {

// out[j] += c * p[j] over a row of L, p widened (vectorises: no aliasing).
CL_CPU_CLONES void add_scaled_row(double c, const float* __restrict p, int64_t L,
                                  double* __restrict out) {
    for (int64_t j = 0; j < L; ++j) out[j] += c * static_cast<double>(p[j]);
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
        const float* mean = it->mean.data_ptr<float>();
        for (int64_t r = 0; r < R; ++r)
            add_scaled_row(0.5 * v[position(r)], mean + r * L, L, next.data());
        v.swap(next);
    }
    return v;
}

// On the attention's device: one copy of (L) doubles to the host per step.
std::vector<double> influence_on_device(const std::vector<LayerAttention>& layers, int64_t L) {
    const auto on = layers.front().mean.options().dtype(torch::kFloat64);  // the device
    auto v = torch::ones({L}, on);                                         // (L)
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
        const auto attn = it->mean.to(torch::kFloat64);  // (R, L)
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

LayerAttention keep(const torch::Tensor& mean, const torch::Tensor& rows,
                    const std::vector<int64_t>& host_rows) {
    LayerAttention a;
    a.rows = rows;
    a.host_rows = host_rows;
    a.by_loops = mean.device().is_cpu() && fast_kernels();  // else plain ops (kernel_choice.h)
    a.mean = a.by_loops ? mean.to(torch::kFloat32).contiguous() : mean;  // (R, L)
    return a;
}

std::vector<double> influence(const std::vector<LayerAttention>& layers, int64_t L) {
    const bool by_loops = std::all_of(layers.begin(), layers.end(),
                                      [](const LayerAttention& a) { return a.by_loops; });
    return by_loops ? influence_by_loops(layers, L) : influence_on_device(layers, L);
}

}  // namespace cl::policies::rollout

// Helpers for tests of the forward: the normalised squared error of a tensor against a reference,
// and the two fixed plans a plan forward is driven with (every row; a given row set at every
// layer).
#pragma once

#include <torch/torch.h>

#include "engine/model/layer_plan.h"

namespace cl::test {

// Normalised mean squared error of `a` against reference `ref`, in float64.
inline double nmse(const torch::Tensor& a, const torch::Tensor& ref) {
    auto r = ref.to(torch::kFloat64);
    return ((a.to(torch::kFloat64) - r).pow(2).sum() / r.pow(2).sum().clamp_min(1e-300))
        .item<double>();
}

// Every row at every layer, K/V written to the cache.
struct EveryRowPlan final : detail::LayerHooks {
    detail::LayerPlan plan(int) override { return {}; }
};

// The rows `rows` at every layer; the other rows' K/V come from the cache.
struct RowsPlan final : detail::LayerHooks {
    detail::RowSet rows;
    detail::LayerPlan plan(int) override {
        detail::LayerPlan p;
        p.all_rows = false;
        p.rows = rows;
        return p;
    }
};

}  // namespace cl::test

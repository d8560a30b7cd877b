// Stage "drift" (observe only, when the sink asks): after each layer of the step's forward, how
// much the K/V of every row it computed moved against the K/V that row had in use, i.e. its last
// computed ones. With `none` (every row computed at every step) this is the true step-to-step
// drift the papers plot; with a cache policy it is what a recompute corrects. The fresh K/V come
// from the layer itself, so the probe costs two small copies per layer, no extra forward.
#include <limits>
#include <numeric>

#include "engine/generation/step_stages.h"

namespace cl::detail {
namespace {

void start_record(RunCore& run, StepWork& work) {
    auto& d = work.rec->drift;
    if (work.rec->has_drift) return;
    work.rec->has_drift = true;
    const auto NL = static_cast<size_t>(run.state.N * run.state.L);
    d.k_cos.assign(NL, std::numeric_limits<float>::quiet_NaN());
    d.v_cos = d.k_rel_l2 = d.v_rel_l2 = d.k_cos;
    if (run.drift.have.size() != NL) {
        run.drift.have.assign(NL, 0);
        run.drift.k.assign(static_cast<size_t>(run.state.N), {});
        run.drift.v.assign(static_cast<size_t>(run.state.N), {});
    }
}

}  // namespace

void observe_drift(RunCore& run, StepWork& work, const LayerResult& layer) {
    if (!layer.k.defined() || !layer.v.defined()) return;
    start_record(run, work);
    const int64_t L = run.state.L;
    const auto l = static_cast<size_t>(layer.layer);
    std::vector<int64_t> rows;
    if (layer.rows) {
        rows = layer.rows->host;
    } else {
        rows.resize(static_cast<size_t>(L));
        std::iota(rows.begin(), rows.end(), int64_t{0});
    }
    auto& store_k = run.drift.k[l];
    auto& store_v = run.drift.v[l];
    if (!store_k.defined()) {  // (Hkv, L, Dh), filled row by row as rows are computed
        store_k = torch::zeros({layer.k.size(0), L, layer.k.size(2)}, layer.k.options());
        store_v = torch::zeros_like(store_k);
    }
    std::vector<int64_t> seen, seen_local;  // rows with earlier K/V: absolute and in `layer.k`
    for (size_t r = 0; r < rows.size(); ++r)
        if (run.drift.have[l * static_cast<size_t>(L) + static_cast<size_t>(rows[r])]) {
            seen.push_back(rows[r]);
            seen_local.push_back(static_cast<int64_t>(r));
        }
    if (!seen.empty()) {
        const auto dev = layer.k.device();
        auto local = RowSet::from_host(seen_local, dev).device;
        auto absolute = RowSet::from_host(seen, dev).device;
        auto& d = work.rec->drift;
        compare_rows(layer.k.index_select(1, local), store_k.index_select(1, absolute), seen,
                     layer.layer, L, d.k_cos, d.k_rel_l2);
        compare_rows(layer.v.index_select(1, local), store_v.index_select(1, absolute), seen,
                     layer.layer, L, d.v_cos, d.v_rel_l2);
    }
    auto all_rows = RowSet::from_host(rows, layer.k.device()).device;
    store_k.index_copy_(1, all_rows, layer.k);
    store_v.index_copy_(1, all_rows, layer.v);
    for (int64_t r : rows) run.drift.have[l * static_cast<size_t>(L) + static_cast<size_t>(r)] = 1;
}

}  // namespace cl::detail

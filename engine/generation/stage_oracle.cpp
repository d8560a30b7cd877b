// Stage "oracle" (observe only, when the sink asks): a full forward beside the cached one, to
// measure what staleness costs: per (layer, row) cosine and relative L2 of the reused K/V against
// fresh ones, the KL of the step's logits, and whether a committed token would have differed.
// It copies to the host by design.
#include <limits>
#include <numeric>

#include "engine/generation/step_stages.h"

namespace cl::detail {
namespace {

class FullForward final : public LayerHooks {
public:
    LayerPlan plan(int) override { return {}; }  // every row, K/V written to the fresh cache
};

// KL(full || cached) of the predicted rows and whether a committed token differs from the full
// forward's argmax.
void compare_logits(RunCore& run, StepWork& work, const torch::Tensor& full_hidden) {
    const int shift = run.model->config().logits_shift;
    std::vector<int64_t> rows;
    rows.reserve(work.predicted_positions.size());
    for (int64_t p : work.predicted_positions) rows.push_back(p - shift);
    auto idx = RowSet::from_host(rows, run.net->device()).device;
    auto full_logits =
        run.net->head(full_hidden.index_select(0, idx)).to(torch::kCPU, torch::kFloat64);  // (M, V)
    auto cached_logits = work.logits.to(torch::kCPU, torch::kFloat64);
    auto lp_full = torch::log_softmax(full_logits, 1),
         lp_cached = torch::log_softmax(cached_logits, 1);
    auto& o = work.rec->oracle;
    o.logits_kl = (lp_full.exp() * (lp_full - lp_cached)).sum(1).mean().item<double>();
    auto full_x0 = full_logits.argmax(1).contiguous();
    const int64_t* fx = full_x0.data_ptr<int64_t>();
    const auto& pos = work.predicted_positions;
    for (size_t c = 0; c < work.commit_count; ++c) {
        const int64_t p = work.candidates[c].second;
        const auto at = std::find(pos.begin(), pos.end(), p) - pos.begin();
        if (fx[at] != run.state.carried_pred[static_cast<size_t>(p)]) o.commit_differs = true;
    }
}

}  // namespace

void compare_rows(const torch::Tensor& x, const torch::Tensor& ref,
                  const std::vector<int64_t>& positions, int64_t layer, int64_t L,
                  std::vector<float>& cos_out, std::vector<float>& rel_out) {
    const auto R = static_cast<int64_t>(positions.size());
    auto a = x.transpose(0, 1).reshape({R, -1}).to(torch::kCPU, torch::kFloat64);  // (R, Hkv*Dh)
    auto b = ref.transpose(0, 1).reshape({R, -1}).to(torch::kCPU, torch::kFloat64);
    auto cos = torch::cosine_similarity(a, b, 1, 1e-12).contiguous();              // (R)
    auto rel = ((a - b).norm(2, 1) / b.norm(2, 1).clamp_min(1e-12)).contiguous();  // (R)
    const double* cp = cos.data_ptr<double>();
    const double* rp = rel.data_ptr<double>();
    for (int64_t r = 0; r < R; ++r) {
        const auto at = static_cast<size_t>(layer * L + positions[static_cast<size_t>(r)]);
        cos_out[at] = static_cast<float>(cp[r]);
        rel_out[at] = static_cast<float>(rp[r]);
    }
}

void measure_oracle(RunCore& run, StepWork& work) {
    if (!work.wants.oracle) return;
    const int64_t L = run.state.L, N = run.state.N;
    auto& o = work.rec->oracle;
    work.rec->has_oracle = true;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    o.k_cos.assign(static_cast<size_t>(N * L), nan);
    o.v_cos = o.k_rel_l2 = o.v_rel_l2 = o.k_cos;
    auto fresh_cache = run.net->make_cache(L, false);
    FullForward full;
    RowSet rows;
    auto full_hidden = run.net->forward_plan(work.ids, full, fresh_cache, rows);  // (L, D)
    auto& used = run.policy->cache();
    std::vector<int64_t> every_row(static_cast<size_t>(L));
    std::iota(every_row.begin(), every_row.end(), int64_t{0});
    for (int64_t l = 0; l < N; ++l) {
        const auto& u = used[static_cast<size_t>(l)];
        if (!u.k.defined() || !u.v.defined()) continue;  // nothing cached at this layer
        const auto& f = fresh_cache[static_cast<size_t>(l)];
        compare_rows(u.k, f.k, every_row, l, L, o.k_cos, o.k_rel_l2);
        compare_rows(u.v, f.v, every_row, l, L, o.v_cos, o.v_rel_l2);
    }
    if (!work.predicted_positions.empty()) compare_logits(run, work, full_hidden);
}

}  // namespace cl::detail

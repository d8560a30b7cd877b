// Stage "record": commit the selected positions, then fill the step's record: token states,
// fresh predictions and the inspector's top-k, the per-(layer, row) cache actions and ages, and
// the analytical FLOPs of what was computed.
#include <limits>

#include "engine/generation/step_stages.h"

namespace cl::detail {
namespace {

void note_ids(RunCore& run, const std::vector<int32_t>& ids, std::map<int32_t, std::string>& out) {
    for (int32_t id : ids)
        if (run.seen_ids.first_sight(id)) out[id] = run.model->tokenizer().token_text(id);
}

void record_tokens(RunCore& run, StepWork& work) {
    const RunState& s = run.state;
    auto& rec = *work.rec;
    rec.tokens = s.x;
    rec.committed = work.committed;
    rec.states.assign(static_cast<size_t>(s.L), trace::TokenState::DecodedEarlier);
    for (int64_t i = 0; i < s.L; ++i) {
        if (i < s.P)
            rec.states[static_cast<size_t>(i)] = trace::TokenState::Prompt;
        else if (s.masked[static_cast<size_t>(i)])
            rec.states[static_cast<size_t>(i)] = trace::TokenState::Masked;
    }
    for (int32_t c : work.committed)
        rec.states[static_cast<size_t>(c)] = trace::TokenState::DecodedNow;
}

// Fresh predictions and the inspector data of each predicted row: top-k, entropy, margin.
void record_predictions(const RunCore& run, StepWork& work) {
    const auto L = static_cast<size_t>(run.state.L);
    const auto& pred = work.predictions;
    auto& rec = *work.rec;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    rec.predicted.assign(L, -1);
    rec.confidence.assign(L, nan);
    const auto& pos = work.predicted_positions;
    if (pos.empty()) return;
    constexpr auto kK = static_cast<size_t>(trace::StepRecord::kTopK);
    const auto K = static_cast<size_t>(pred.top_k);
    rec.topk_ids.assign(L * kK, -1);
    rec.topk_probs.assign(L * kK, nan);
    rec.entropy.assign(L, nan);
    rec.margin.assign(L, nan);
    for (size_t i = 0; i < pos.size(); ++i) {
        const auto p = static_cast<size_t>(pos[i]);
        for (size_t k = 0; k < K; ++k) {
            rec.topk_ids[p * kK + k] = pred.topk_ids[i * K + k];
            rec.topk_probs[p * kK + k] = static_cast<float>(pred.topk_probs[i * K + k]);
        }
        rec.entropy[p] = static_cast<float>(pred.entropy[i]);
        rec.margin[p] =
            K > 1 ? static_cast<float>(pred.topk_probs[i * K] - pred.topk_probs[i * K + 1]) : 1.f;
        rec.predicted[p] = pred.token[i];
        rec.confidence[p] = static_cast<float>(pred.confidence[i]);
    }
}

// Per (layer, row): computed rows Recomputed, others KvReused, then the policy's own actions;
// cache ages and the FLOPs of the computed rows and probes.
void record_cache(RunCore& run, StepWork& work) {
    RunState& s = run.state;
    auto& rec = *work.rec;
    const auto& mc = run.model->config();
    const auto L = static_cast<size_t>(s.L);
    rec.actions.assign(static_cast<size_t>(s.N) * L, trace::RowAction::KvReused);
    rec.cache_age.assign(static_cast<size_t>(s.N) * L, 0);
    double flops = 0;
    for (size_t l = 0; l < static_cast<size_t>(s.N); ++l) {
        auto* row = rec.actions.data() + l * L;
        int64_t R = s.L;
        if (work.all_rows[l]) {
            std::fill(row, row + L, trace::RowAction::Recomputed);
        } else {
            R = static_cast<int64_t>(work.layer_rows[l].size());
            for (int64_t r : work.layer_rows[l]) row[r] = trace::RowAction::Recomputed;
        }
        flops += layer_flops(mc, R, s.L) + work.probe_flops[l];
    }
    run.policy->annotate(rec.actions);
    for (size_t i = 0; i < rec.actions.size(); ++i) {
        if (rec.actions[i] == trace::RowAction::Recomputed) s.last_compute[i] = s.step;
        rec.cache_age[i] = static_cast<uint16_t>(std::min(65535, s.step - s.last_compute[i]));
    }
    const double cfg_mult = run.cfg.cfg_scale > 0 ? 2.0 : 1.0;
    const auto M = static_cast<int64_t>(work.predicted_positions.size());
    rec.flops = cfg_mult * (flops + head_flops(mc, M));
    rec.flops_full = cfg_mult * (static_cast<double>(s.N) * layer_flops(mc, s.L, s.L) +
                                 head_flops(mc, work.masked_before));
}

}  // namespace

void commit_and_record(RunCore& run, StepWork& work) {
    RunState& s = run.state;
    for (size_t c = 0; c < work.commit_count; ++c) {
        const auto pos = static_cast<size_t>(work.candidates[c].second);
        s.x[pos] = s.carried_pred[pos];
        if (!s.uniform) {  // absorbing: a committed token never changes again
            s.masked[pos] = 0;
            s.carried_pred[pos] = -1;
        }
        work.committed.push_back(static_cast<int32_t>(pos));
    }
    record_tokens(run, work);
    record_predictions(run, work);
    auto& rec = *work.rec;
    note_ids(run, rec.tokens, rec.new_token_text);
    note_ids(run, rec.predicted, rec.new_token_text);
    note_ids(run, rec.topk_ids, rec.new_token_text);
    record_cache(run, work);
}

}  // namespace cl::detail

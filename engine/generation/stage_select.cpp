// Stage "select": which masked positions of the current block this step commits (under uniform
// noise: which positions it updates). Fresh predictions replace the carried ones; rows a policy
// did not recompute keep their last prediction for ranking (d2Cache) but cannot be committed. Then
// the transfer schedule, or parallel decoding (threshold or factor), or the certainty prior decides
// how many.
#include <algorithm>
#include <cmath>

#include "engine/cuda/certainty_density.h"
#include "engine/generation/sampler.h"
#include "engine/generation/step_stages.h"

namespace cl::detail {
namespace {

// The certainty prior over the current block's positions (engine/cuda/certainty_density.h); 0
// elsewhere.
std::vector<double> certainty_density(const RunState& s, double sigma) {
    std::vector<double> density(static_cast<size_t>(s.L), 0.0);
    cuda::certainty_density_cpu(s.masked.data(), s.L, {s.block_start(), s.block_end(), sigma},
                                density.data());
    return density;
}

// How many of the ranked candidates to commit.
size_t commit_count(const RunState& s, const GenerationConfig& cfg,
                    const std::vector<std::pair<double, int64_t>>& cand) {
    size_t k = 0;
    if (cand.empty()) return 0;
    if (cfg.threshold > 0) {
        while (k < cand.size() &&
               s.carried_conf[static_cast<size_t>(cand[k].second)] >= cfg.threshold)
            ++k;
        k = std::max<size_t>(k, 1);
    } else if (cfg.factor > 0) {
        while (k < cand.size() && cand[k].first >= 1.0 - cfg.factor / static_cast<double>(k + 2))
            ++k;
        k = std::max<size_t>(k, 1);
    } else if (s.step_in_block < s.S) {
        k = scheduled_count(s, cfg, cand);
    } else {
        k = cand.size();  // overtime (a policy left masks behind): finish the block
    }
    return std::min(k, cand.size());
}

// Uniform noise: every in-block position whose fresh top token differs from its token, ranked by
// the update rule; the schedule's count per step, all of them at the block's last budgeted step
// (no noise token survives the block), or those scoring >= threshold under parallel decoding.
// The block is settled when every position was predicted and none differs.
void select_updates(RunCore& run, StepWork& work, const std::vector<uint8_t>& fresh,
                    const std::vector<double>& current_prob) {
    RunState& s = run.state;
    auto& cand = work.candidates;
    bool all_fresh = true;
    for (int64_t i = s.block_start(); i < s.block_end(); ++i) {
        const auto u = static_cast<size_t>(i);
        if (!fresh[u]) {
            all_fresh = false;
            continue;
        }
        if (s.carried_pred[u] == s.x[u]) continue;
        const double conf = s.carried_conf[u];
        cand.emplace_back(
            run.cfg.update_rule == UpdateRule::Adaptive ? conf - current_prob[u] : conf, i);
    }
    s.block_settled = all_fresh && cand.empty();
    std::stable_sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    size_t k = cand.size();
    if (run.cfg.threshold > 0) {
        k = 0;
        while (k < cand.size() && cand[k].first >= run.cfg.threshold) ++k;
        k = std::max<size_t>(k, std::min<size_t>(1, cand.size()));
    } else if (s.step_in_block + 1 < s.S) {
        k = std::min(k, static_cast<size_t>(s.schedule[static_cast<size_t>(s.step_in_block)]));
    }
    work.commit_count = k;
}

// Dream's alg_temp: the k committed positions are a draw without replacement from
// softmax(score / alg_temp), taken as the top k of score / alg_temp + Gumbel noise (the same
// distribution) with counter-based draws, so a run replays exactly.
void rerank_by_alg_temp(const RunState& s, const GenerationConfig& cfg,
                        std::vector<std::pair<double, int64_t>>& cand) {
    constexpr uint64_t kAlgTempStream = 0x616c675f74656d70ull;  // "alg_temp"
    for (auto& [score, pos] : cand) {
        const double u = remask_uniform(cfg.seed ^ kAlgTempStream, s.step, pos);
        score = score / cfg.alg_temp - std::log(-std::log(u));
    }
    std::stable_sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
}

}  // namespace

size_t scheduled_count(const RunState& s, const GenerationConfig& cfg,
                       const std::vector<std::pair<double, int64_t>>& ranked) {
    const auto step = static_cast<size_t>(s.step_in_block);
    if (cfg.schedule == TransferSchedule::Even) return static_cast<size_t>(s.schedule[step]);
    const float fraction = s.dream_fractions[step];
    if (cfg.remasking == Remasking::Random) {
        // Dream's origin: each mask independently with probability p = 1 - s/t, which for a
        // uniform draw u is u >= 1 - p; the ranking puts those first.
        const double bar = 1.0 - static_cast<double>(fraction);
        size_t k = 0;
        while (k < ranked.size() && ranked[k].first >= bar) ++k;
        return k;
    }
    return static_cast<size_t>(dream_transfer_count(s.block_masked_count(), fraction));
}

void select_commits(RunCore& run, StepWork& work) {
    RunState& s = run.state;
    const auto& pos = work.predicted_positions;
    std::vector<uint8_t> fresh(static_cast<size_t>(s.L), 0);
    for (size_t i = 0; i < pos.size(); ++i) {
        const auto p = static_cast<size_t>(pos[i]);
        s.carried_pred[p] = work.predictions.token[i];
        s.carried_conf[p] = work.predictions.confidence[i];
        fresh[p] = 1;
    }
    if (s.uniform) {
        std::vector<double> current_prob(static_cast<size_t>(s.L), 0.0);
        for (size_t i = 0; i < pos.size(); ++i)
            current_prob[static_cast<size_t>(pos[i])] = work.predictions.current_prob[i];
        select_updates(run, work, fresh, current_prob);
        return;
    }
    std::vector<double> density;
    if (run.cfg.certainty_prior) density = certainty_density(s, run.cfg.certainty_sigma);
    auto& cand = work.candidates;  // (score, position)
    for (int64_t i = s.block_start(); i < s.block_end(); ++i) {
        if (!s.masked[static_cast<size_t>(i)] || !fresh[static_cast<size_t>(i)]) continue;
        double score = s.carried_conf[static_cast<size_t>(i)];
        if (run.cfg.certainty_prior) score *= density[static_cast<size_t>(i)];
        cand.emplace_back(score, i);
    }
    // Highest score first; ties broken by position so the order is deterministic.
    std::stable_sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    work.commit_count = commit_count(s, run.cfg, cand);
    if (run.cfg.alg_temp > 0 && run.cfg.remasking != Remasking::Random &&
        !run.cfg.parallel_decoding())
        rerank_by_alg_temp(s, run.cfg, cand);
}

}  // namespace cl::detail

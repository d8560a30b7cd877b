// Stages "begin" and "probes": the block's transfer schedule, the commits known before the
// forward, the policy's step hooks, and what the sink wants to observe.
#include <algorithm>

#include "engine/generation/step_stages.h"

namespace cl::detail {

StepContext RunCore::context(std::vector<trace::TriggerEvent>* triggers) const {
    const RunState& s = state;
    StepContext c;
    c.step = s.step;
    c.block = s.block;
    c.step_in_block = s.step_in_block;
    c.prompt_len = s.P;
    c.seq_len = s.L;
    c.block_start = s.block_start();
    c.block_end = s.block_end();
    c.tokens = &s.x;
    c.masked = &s.masked;
    c.decoded_last_step = &s.last_committed;
    c.triggers = triggers;
    c.last_prediction = &s.carried_pred;
    c.last_confidence = &s.carried_conf;
    c.planned_commits = &s.planned;
    c.certainty_prior = cfg.certainty_prior;
    c.certainty_sigma = cfg.certainty_sigma;
    c.steps_per_block = s.S;
    return c;
}

namespace {

// Random remasking with a schedule draws its confidences without the forward, so the positions it
// will commit are known now (dKV-Cache-Greedy plans around them).
std::vector<int32_t> planned_commits(const RunState& s, const GenerationConfig& cfg) {
    std::vector<int32_t> planned;
    if (cfg.remasking != Remasking::Random || cfg.parallel_decoding() || cfg.certainty_prior ||
        s.step_in_block >= s.S)
        return planned;
    std::vector<std::pair<double, int64_t>> u;
    for (int64_t i = s.block_start(); i < s.block_end(); ++i)
        if (s.masked[static_cast<size_t>(i)])
            u.emplace_back(remask_uniform(cfg.seed, s.step, i), i);
    std::stable_sort(u.begin(), u.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    const size_t k = std::min(u.size(), scheduled_count(s, cfg, u));
    for (size_t i = 0; i < k; ++i) planned.push_back(static_cast<int32_t>(u[i].second));
    return planned;
}

}  // namespace

void begin_step(RunCore& run, StepWork& work) {
    RunState& s = run.state;
    auto& rec = *work.rec;
    rec.run_id = run.info.run_id;
    rec.step = s.step;
    rec.block = s.block;
    rec.step_in_block = s.step_in_block;
    rec.seq_len = static_cast<int32_t>(s.L);
    rec.n_layers = static_cast<int32_t>(s.N);
    work.masked_before = s.masked_count();
    if (s.step_in_block == 0) {
        s.schedule = transfer_schedule(s.block_masked_count(), s.S);
        // The same for every block: computed once per run.
        if (run.cfg.schedule == TransferSchedule::Dream && s.dream_fractions.empty())
            s.dream_fractions = dream_transfer_fractions(s.S);
        run.policy->on_block_start(run.context(&rec.triggers));
    }
    s.planned = planned_commits(s, run.cfg);
    work.ctx = run.context(&rec.triggers);
    run.policy->begin_step(work.ctx);
}

ProbeWants ask_probes(const RunCore& run) {
    const auto N = static_cast<size_t>(run.state.N);
    ProbeWants w;
    w.mean.assign(N, false);
    w.heads.assign(N, {});
    w.full_resolution.assign(N, false);
    if (!run.sink) return w;
    const int32_t step = run.state.step, id = run.info.run_id;
    for (size_t l = 0; l < N; ++l) {
        trace::ProbeRequest r{trace::ProbeKind::Attention, id, step, static_cast<int32_t>(l), -1};
        w.mean[l] = run.sink->wants(r);
        for (int32_t h = 0; h < run.info.n_heads; ++h) {
            r.head = h;
            if (run.sink->wants(r)) w.heads[l].push_back(h);
        }
        w.attention = w.attention || w.mean[l] || !w.heads[l].empty();
        if (run.attention_tile > 1 && (w.mean[l] || !w.heads[l].empty()))
            w.full_resolution[l] = run.sink->wants(
                {trace::ProbeKind::FullResolution, id, step, static_cast<int32_t>(l), -1});
    }
    w.oracle =
        run.cfg.cfg_scale == 0 && run.sink->wants({trace::ProbeKind::Oracle, id, step, -1, -1});
    w.drift = run.sink->wants({trace::ProbeKind::Drift, id, step, -1, -1});
    return w;
}

}  // namespace cl::detail

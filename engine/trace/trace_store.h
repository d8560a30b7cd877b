// TraceStore: the append-only store of runs and their step records.
//
// Filled live by the engine (it is a TraceSink) or by a session reader; viewers only read.
// Appends take a short lock; readers take snapshots (vectors of shared_ptr) so that no lock is
// held while drawing. `is_live()` is the only thing a viewer may ask about where data came from.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <set>

#include "engine/trace/probe.h"

namespace cl::trace {

struct RunTrace {
    RunInfo info;
    std::vector<std::shared_ptr<const StepRecord>> steps;
    RunSummary summary;
};

class TraceStore final : public TraceSink {
public:
    explicit TraceStore(bool live = true) : m_live(live) {}

    // Which optional probes this store asks the engine for.
    void request_attention(int32_t layer, int32_t head) {
        std::lock_guard lock(m_mutex);
        m_attention_requests.insert({layer, head});
    }
    void set_want_all_attention_means(bool on) { m_all_attention_means = on; }
    // The bytes a run's head-mean maps may take (attention_detail.h) and layers never pooled.
    void set_attention_budget(double bytes) { m_attention_budget = bytes; }
    void request_full_resolution(int32_t layer) {
        std::lock_guard lock(m_mutex);
        m_full_resolution.insert(layer);
    }
    double attention_budget_bytes() const override { return m_attention_budget.load(); }
    void set_want_oracle(bool on) { m_oracle = on; }
    void set_want_drift(bool on) { m_drift = on; }

    bool wants(const ProbeRequest& request) const override;
    void on_run_start(const RunInfo& info) override;
    void publish(std::shared_ptr<const StepRecord> record) override;
    void on_run_end(int32_t run_id, const RunSummary& summary) override;

    bool is_live() const { return m_live; }
    std::vector<int32_t> run_ids() const;
    std::optional<RunInfo> run_info(int32_t run_id) const;
    std::optional<RunSummary> run_summary(int32_t run_id) const;
    size_t step_count(int32_t run_id) const;
    std::shared_ptr<const StepRecord> step(int32_t run_id, int32_t step) const;
    std::vector<std::shared_ptr<const StepRecord>> steps(int32_t run_id) const;
    // Bumped on every append, so viewers can cheaply notice new data.
    uint64_t generation() const { return m_generation.load(std::memory_order_acquire); }

private:
    RunTrace* find(int32_t run_id);
    const RunTrace* find(int32_t run_id) const;

    bool m_live;
    mutable std::mutex m_mutex;
    std::vector<RunTrace> m_runs;
    std::set<std::pair<int32_t, int32_t>> m_attention_requests;  // (layer, head)
    std::set<int32_t> m_full_resolution;                         // layers
    std::atomic<double> m_attention_budget{kDefaultAttentionBudgetBytes};
    std::atomic<bool> m_all_attention_means{false};
    std::atomic<bool> m_oracle{false};
    std::atomic<bool> m_drift{false};
    std::atomic<uint64_t> m_generation{0};
};

}  // namespace cl::trace

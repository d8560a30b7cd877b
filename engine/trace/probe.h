// The engine -> trace contract: two-phase probes (ggml's ask/observe).
//
// The engine asks `wants()` before it computes or copies anything optional (an attention map,
// an oracle comparison), and only publishes what was asked for. A run with no sink attached,
// or with a sink that wants nothing, pays nothing for instrumentation.
#pragma once

#include <algorithm>
#include <memory>

#include "engine/trace/attention_detail.h"
#include "engine/trace/trace_types.h"

namespace cl::trace {

enum class ProbeKind : uint8_t {
    StepRecord,      // the per-step record itself (tokens, actions, timing): cheap
    Attention,       // attention probabilities for (layer, head); head -1 = mean over heads
    Oracle,          // a full forward beside the cached one
    Drift,           // per (layer, row) change of the computed K/V (StepRecord drift_* arrays)
    FullResolution,  // layer's attention maps never pooled into tiles (attention_detail.h)
};

struct ProbeRequest {
    ProbeKind kind = ProbeKind::StepRecord;
    int32_t run_id = 0;
    int32_t step = 0;
    int32_t layer = -1;
    int32_t head = -1;
};

class TraceSink {
public:
    virtual ~TraceSink() = default;
    // Ask: called on the engine thread, must be cheap and must not block.
    virtual bool wants(const ProbeRequest& request) const = 0;
    // The bytes one run's head-mean attention maps may take (the engine pools them into tiles to
    // fit, attention_detail.h); asked once when a run starts.
    virtual double attention_budget_bytes() const { return kDefaultAttentionBudgetBytes; }
    // Observe: called on the engine thread with immutable records; must not block.
    virtual void on_run_start(const RunInfo& info) = 0;
    virtual void publish(std::shared_ptr<const StepRecord> record) = 0;
    virtual void on_run_end(int32_t run_id, const RunSummary& summary) = 0;
};

// Forwards every call to several sinks; `wants` is the union of theirs.
class FanOutSink final : public TraceSink {
public:
    void add(TraceSink* sink) {
        if (sink) m_sinks.push_back(sink);
    }
    bool empty() const { return m_sinks.empty(); }
    bool wants(const ProbeRequest& request) const override {
        for (auto* s : m_sinks)
            if (s->wants(request)) return true;
        return false;
    }
    // The tightest of the sinks' budgets: every sink holds what the record holds.
    double attention_budget_bytes() const override {
        if (m_sinks.empty()) return kDefaultAttentionBudgetBytes;
        double budget = m_sinks.front()->attention_budget_bytes();
        for (auto* s : m_sinks) budget = std::min(budget, s->attention_budget_bytes());
        return budget;
    }
    void on_run_start(const RunInfo& info) override {
        for (auto* s : m_sinks) s->on_run_start(info);
    }
    void publish(std::shared_ptr<const StepRecord> record) override {
        for (auto* s : m_sinks) s->publish(record);
    }
    void on_run_end(int32_t run_id, const RunSummary& summary) override {
        for (auto* s : m_sinks) s->on_run_end(run_id, summary);
    }

private:
    std::vector<TraceSink*> m_sinks;
};

}  // namespace cl::trace

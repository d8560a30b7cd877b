// RowSetPolicy: the shared shape of policies that compute the same rows at every layer of a step
// (dKV-Cache variants, Fast-dLLM prefix/dual, d2Cache): a full refresh or one row set, K/V of
// every other row from the cache. Subclasses only decide; this class plans, caches and explains.
#pragma once

#include <algorithm>
#include <set>
#include <string>

#include "engine/generation/policy.h"

namespace cl::policies {

struct RowChoice {
    bool full = false;
    std::vector<int64_t> rows;  // sorted, unique; ignored when full
    std::string reason;         // trigger kind: "block-start", "interval", "first-step", ...
    std::string detail;         // human-readable action
};

class RowSetPolicy : public CachePolicy {
public:
    void on_run_start(detail::Transformer& net, int64_t seq_len) override {
        m_cache = net.make_cache(seq_len, false);
        m_device = net.device();
        m_seq_len = seq_len;
    }
    void begin_step(const StepContext& ctx) override {
        m_choice = choose(ctx);
        if (!m_choice.full) {
            auto& r = m_choice.rows;
            std::sort(r.begin(), r.end());
            r.erase(std::unique(r.begin(), r.end()), r.end());
            if (static_cast<int64_t>(r.size()) == m_seq_len)
                m_choice.full = true;  // nothing reused
        }
        if (!m_choice.full) m_rows = detail::RowSet::from_host(m_choice.rows, m_device);
        trace::TriggerEvent e;
        e.kind = m_choice.reason.empty() ? (m_choice.full ? "full" : "selection") : m_choice.reason;
        e.fired = m_choice.full;
        e.value = m_choice.full ? static_cast<double>(m_seq_len)
                                : static_cast<double>(m_choice.rows.size());
        e.action =
            m_choice.detail.empty()
                ? (m_choice.full ? "full forward, cache rebuilt"
                                 : "recompute " + std::to_string(m_choice.rows.size()) + " rows")
                : m_choice.detail;
        if (ctx.triggers) ctx.triggers->push_back(e);
    }
    detail::LayerPlan plan_layer(int layer) override {
        detail::LayerPlan p;
        p.all_rows = m_choice.full;
        if (!m_choice.full) p.rows = m_rows;
        p.write_kv = true;
        p.want_head_mean = wants_head_mean();
        return p;
    }
    std::vector<detail::LayerCache>& cache() override { return m_cache; }

protected:
    virtual RowChoice choose(const StepContext& ctx) = 0;
    virtual bool wants_head_mean() const { return false; }

    // Helpers for subclasses.
    static std::vector<int64_t> masked_rows(const StepContext& ctx, int64_t from = 0,
                                            int64_t to = -1) {
        std::vector<int64_t> out;
        if (to < 0) to = ctx.seq_len;
        for (int64_t i = from; i < to; ++i)
            if ((*ctx.masked)[static_cast<size_t>(i)]) out.push_back(i);
        return out;
    }
    static std::vector<int64_t> range(int64_t from, int64_t to) {
        std::vector<int64_t> out;
        for (int64_t i = from; i < to; ++i) out.push_back(i);
        return out;
    }
    static void append(std::vector<int64_t>& to, const std::vector<int32_t>& from) {
        for (int32_t v : from) to.push_back(v);
    }
    static RowChoice full_choice(const std::string& reason, const std::string& detail = "") {
        RowChoice c;
        c.full = true;
        c.reason = reason;
        c.detail = detail;
        return c;
    }

    std::vector<detail::LayerCache> m_cache;
    torch::Device m_device{torch::kCPU};
    int64_t m_seq_len = 0;
    RowChoice m_choice;
    detail::RowSet m_rows;  // the rows of a partial step
};

}  // namespace cl::policies

// Policy `elastic` (Elastic-Cache, arXiv 2510.14973): attention-drift trigger + depth-aware
// refresh. Query rows at every layer: the window W (the first w masked rows from the current
// block), the tracked most-attended tokens and the rows decoded at the previous step; other rows
// reuse cached K/V and layer inputs. At each layer the drift test compares the attention the window
// pays to the tracked token (the decoded key it attends to most at that layer) with the previous
// step: cos(now, before) < gamma fires at l*, and the layers from l* on are recomputed for every
// row. Deviation, on purpose: the paper refreshes layers > l*; CacheLens refreshes from l*
// inclusive so that gamma = 1 (always fire) reproduces the baseline exactly (POLICIES.md section
// 5). The first step of the run is full. Decoding: confidence threshold (own decoding, tau 0.9).
#include <algorithm>
#include <cmath>

#include "engine/generation/policies/elastic_attention.h"
#include "engine/generation/policy.h"

namespace cl::policies {
namespace {

class Elastic final : public CachePolicy {
public:
    struct Params {
        int64_t window = 16;
        double gamma = 0.9;
        int64_t track_num = 1;
        bool block_caching = true;
        static const ParamList<Params>& list() {
            static const ParamList<Params> l{
                {"window", &Params::window, 1, 65536, 16,
                 "w: the first w masked rows are the queries"},
                {"gamma", &Params::gamma, 0, 1, 0.9,
                 "drift threshold: refresh when cos(attention now, before) < gamma"},
                {"track_num", &Params::track_num, 1, 16, 1,
                 "most-attended decoded tokens tracked per layer"},
                {"block_caching", &Params::block_caching, 0, 1, 1,
                 "1 = window from the current block; 0 = every mask is a query"}};
            return l;
        }
    };
    static PolicyInfo static_info() {
        return {
            "elastic",
            "Elastic-Cache: window queries, attention-drift test per layer, refresh deeper layers",
            Params::list().specs(),
            {.threshold = 0.9}};
    }
    void set_params(const std::map<std::string, double>& resolved) override {
        m_p = Params::list().read(resolved);
    }
    void on_run_start(detail::Transformer& net, int64_t seq_len) override {
        m_cache = net.make_cache(seq_len, /*with_hidden=*/true);
        m_device = net.device();
        m_seq_len = seq_len;
        m_prev.assign(m_cache.size(), {});
        m_tracked.assign(m_cache.size(), {});
    }
    void begin_step(const StepContext& ctx) override {
        m_ctx = ctx;
        m_full = ctx.step == 0;
        m_fired_at = m_full ? 0 : -1;
        m_queries.clear();
        m_window.clear();
        if (m_full) {
            push(ctx, "first-step", 0, NAN, NAN, true, "full forward");
            return;
        }
        const auto w = static_cast<size_t>(m_p.window);
        const int64_t from = m_p.block_caching ? ctx.block_start : ctx.prompt_len;
        for (int64_t i = from; i < ctx.seq_len && m_window.size() < w; ++i)
            if ((*ctx.masked)[static_cast<size_t>(i)]) m_window.push_back(i);
        std::vector<uint8_t> in(static_cast<size_t>(ctx.seq_len), 0);
        auto add = [&](int64_t i) {
            if (!in[static_cast<size_t>(i)]) {
                in[static_cast<size_t>(i)] = 1;
                m_queries.push_back(i);
            }
        };
        for (int64_t i : m_window) add(i);
        for (const auto& t : m_tracked)
            for (int64_t i : t) add(i);
        for (int32_t d : *ctx.decoded_last_step) add(d);
        std::sort(m_queries.begin(), m_queries.end());
        // m_query_row[position] = the row of a layer's probabilities holding that query, or -1.
        m_query_row.assign(static_cast<size_t>(ctx.seq_len), -1);
        for (size_t i = 0; i < m_queries.size(); ++i)
            m_query_row[static_cast<size_t>(m_queries[i])] = static_cast<int32_t>(i);
        m_rows = detail::RowSet::from_host(m_queries, m_device);
    }
    detail::LayerPlan plan_layer(int layer) override {
        detail::LayerPlan p;
        p.write_kv = true;
        p.write_hidden = true;
        p.want_probs = true;
        if (m_full || m_fired_at >= 0 || m_queries.empty()) return p;  // every row
        p.all_rows = false;
        p.rows = m_rows;
        p.may_escalate = true;
        return p;
    }
    // The drift test at this layer, on the attention of the query rows: firing recomputes this
    // layer and every deeper one for every row.
    bool escalate(int layer, const torch::Tensor& probs) override {
        return drift_test(layer, probs);
    }
    void observe_layer(const detail::LayerResult& r) override {
        // Track the decoded keys the window attends to most, and remember its attention for next
        // step. Plain loops over the (H, R, L) probabilities on the CPU (a dozen small LibTorch ops
        // per layer cost more than the few query rows this policy computes), kernels on a GPU.
        if (!r.probs.defined()) return;  // plan_layer always asks for them; nothing to track
        const bool all_rows = r.rows == nullptr;  // full or escalated: row = position
        std::vector<int64_t> window = m_window;
        if (window.empty())  // full steps: the window the next step will use
            for (int64_t i = m_ctx.block_start;
                 i < m_seq_len && window.size() < static_cast<size_t>(m_p.window); ++i)
                if ((*m_ctx.masked)[static_cast<size_t>(i)]) window.push_back(i);
        auto& prev = m_prev[static_cast<size_t>(r.layer)];
        prev.rows.clear();
        std::vector<int32_t> locals;
        for (int64_t q : window) {
            const int32_t local =
                all_rows ? static_cast<int32_t>(q) : m_query_row[static_cast<size_t>(q)];
            if (local < 0) continue;
            prev.rows.push_back(q);
            locals.push_back(local);
        }
        prev.attn = elastic::window_head_mean(r.probs, locals);  // (W, L)
        // Most-attended decoded keys (column sums over window queries, masked keys excluded).
        auto& tracked = m_tracked[static_cast<size_t>(r.layer)];
        tracked.clear();
        if (prev.rows.empty()) return;
        tracked = elastic::most_attended_keys(prev.attn, *m_ctx.masked, m_p.track_num);
    }
    std::vector<detail::LayerCache>& cache() override { return m_cache; }

private:
    Params m_p;
    struct PrevAttention {
        std::vector<int64_t> rows;  // window query positions
        torch::Tensor attn;         // (W, L) float64 head-mean attention of those rows
    };
    bool drift_test(int layer, const torch::Tensor& probs) {
        const auto& prev = m_prev[static_cast<size_t>(layer)];
        const auto& tracked = m_tracked[static_cast<size_t>(layer)];
        const double gamma = m_p.gamma;
        if (gamma >= 1.0) return fire(layer, NAN, gamma);  // conservative setting: always refresh
        if (prev.rows.empty() || tracked.empty()) return fire(layer, NAN, gamma);
        // Cosine of the tracked columns over the window rows present in both steps (escalation
        // tests run on the query rows only).
        std::vector<int32_t> rows_now;
        rows_now.reserve(prev.rows.size());
        for (int64_t q : prev.rows) rows_now.push_back(m_query_row[static_cast<size_t>(q)]);
        const auto sums = elastic::drift_sums(probs, rows_now, prev.attn, tracked);
        if (!sums.shared) return fire(layer, NAN, gamma);
        const double cos = sums.cosine();
        if (cos < gamma) return fire(layer, cos, gamma);
        push(m_ctx, "drift", layer, cos, gamma, false, "cached");  // every test is explained
        return false;
    }
    bool fire(int layer, double value, double gamma) {
        m_fired_at = layer;
        push(m_ctx, "drift", layer, value, gamma, true,
             "recompute every row from layer " + std::to_string(layer));
        return true;
    }
    void push(const StepContext& ctx, const std::string& kind, int layer, double value,
              double threshold, bool fired, const std::string& action) {
        if (!ctx.triggers) return;
        trace::TriggerEvent e;
        e.kind = kind;
        e.layer = layer;
        e.value = value;
        e.threshold = threshold;
        e.fired = fired;
        e.action = action;
        ctx.triggers->push_back(e);
    }

    std::vector<detail::LayerCache> m_cache;
    torch::Device m_device{torch::kCPU};
    int64_t m_seq_len = 0;
    StepContext m_ctx;
    bool m_full = true;
    int m_fired_at = -1;
    std::vector<int64_t> m_window, m_queries;
    std::vector<int32_t> m_query_row;  // (L) query position -> row in a layer's probabilities
    detail::RowSet m_rows;
    std::vector<PrevAttention> m_prev;
    std::vector<std::vector<int64_t>> m_tracked;
};

CL_REGISTER_POLICY(Elastic);

}  // namespace
}  // namespace cl::policies

// Policy `elastic` (Elastic-Cache, arXiv 2510.14973): attention-drift trigger + depth-aware
// refresh. Query rows at every layer: the window W (the first w masked rows from the current
// block), the tracked most-attended tokens and the rows decoded at the previous step; other rows
// reuse cached K/V and layer inputs. At each layer the drift test compares the attention the window
// pays to the tracked token (the decoded key it attends to most at that layer) with the previous
// step: cos(now, before) < gamma fires at l*, and the layers from l* on are recomputed for every
// row. Deviation, on purpose: the paper refreshes layers > l*; CacheLens refreshes from l*
// inclusive so that gamma = 1 (always fire) reproduces the baseline exactly (POLICIES.md section
// 5). The first step of the run is full. Decoding: confidence threshold (own decoding, tau 0.9).
#include <cmath>
#include <map>

#include "engine/core/policy.h"

namespace cl::policies {
namespace {

class Elastic final : public CachePolicy {
public:
    static PolicyInfo static_info() {
        return {
            "elastic",
            "Elastic-Cache: window queries, attention-drift test per layer, refresh deeper layers",
            {{"window", 16, 1, 65536, true, "w: the first w masked rows are the queries"},
             {"gamma", 0.9, 0, 1, false,
              "drift threshold: refresh when cos(attention now, before) < gamma"},
             {"track_num", 1, 1, 16, true, "most-attended decoded tokens tracked per layer"},
             {"block_caching", 1, 0, 1, true,
              "1 = window from the current block; 0 = every mask is a query"}},
            {{"threshold", 0.9}}};
    }
    const PolicyInfo& info() const override {
        static const PolicyInfo i = static_info();
        return i;
    }
    void on_run_start(detail::LladaNet& net, int64_t seq_len) override {
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
        const auto w = static_cast<size_t>(param("window"));
        const int64_t from = param("block_caching") > 0 ? ctx.block_start : ctx.prompt_len;
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
        m_rows = torch::tensor(m_queries, torch::TensorOptions().dtype(torch::kLong)).to(m_device);
    }
    detail::LayerPlan plan_layer(int layer) override {
        detail::LayerPlan p;
        p.write_kv = true;
        p.write_hidden = true;
        p.want_probs = true;
        if (m_full || m_fired_at >= 0 || m_queries.empty()) return p;  // every row
        p.all_rows = false;
        p.rows = m_rows;
        p.escalate = [this, layer](const torch::Tensor& probs) { return drift_test(layer, probs); };
        return p;
    }
    void observe_layer(const detail::LayerResult& r) override {
        // Track the decoded keys the window attends to most, and remember its attention for next
        // step.
        auto rows = r.rows ? r.rows->to(torch::kCPU) : torch::arange(m_seq_len, torch::kLong);
        std::vector<int64_t> wrows;
        auto rp = rows.accessor<int64_t, 1>();
        std::map<int64_t, int64_t> local;
        for (int64_t i = 0; i < rows.size(0); ++i) local[rp[i]] = i;
        std::vector<int64_t> window = m_window;
        if (window.empty())  // full steps: the window the next step will use
            for (int64_t i = m_ctx.block_start;
                 i < m_seq_len && window.size() < static_cast<size_t>(param("window")); ++i)
                if ((*m_ctx.masked)[static_cast<size_t>(i)]) window.push_back(i);
        std::vector<int64_t> idx;
        for (int64_t q : window)
            if (local.count(q)) {
                idx.push_back(local[q]);
                wrows.push_back(q);
            }
        auto& prev = m_prev[static_cast<size_t>(r.layer)];
        prev.rows = wrows;
        // Only the window's rows are needed: select them before averaging over heads.
        prev.attn = idx.empty() ? torch::Tensor()
                                : r.probs.index_select(1, torch::tensor(idx).to(r.probs.device()))
                                      .mean(0)
                                      .to(torch::kCPU, torch::kFloat64)
                                      .contiguous();  // (W, L)
        // Most-attended decoded keys (column sums over window queries, masked keys excluded).
        auto& tracked = m_tracked[static_cast<size_t>(r.layer)];
        tracked.clear();
        if (!prev.attn.defined()) return;
        auto col_t = prev.attn.sum(0).contiguous();  // (L)
        const double* colp = col_t.data_ptr<double>();
        std::vector<std::pair<double, int64_t>> keys;
        for (int64_t i = 0; i < m_seq_len; ++i)
            if (!(*m_ctx.masked)[static_cast<size_t>(i)]) keys.emplace_back(colp[i], i);
        const auto n = std::min<size_t>(keys.size(), static_cast<size_t>(param("track_num")));
        std::partial_sort(keys.begin(), keys.begin() + static_cast<long>(n), keys.end(),
                          [](const auto& a, const auto& b) { return a.first > b.first; });
        for (size_t i = 0; i < n; ++i) tracked.push_back(keys[i].second);
    }
    std::vector<detail::LayerCache>& cache() override { return m_cache; }

private:
    struct PrevAttention {
        std::vector<int64_t> rows;  // window query positions
        torch::Tensor attn;         // (W, L) head-mean attention of those rows
    };

    bool drift_test(int layer, const torch::Tensor& probs) {
        const auto& prev = m_prev[static_cast<size_t>(layer)];
        const auto& tracked = m_tracked[static_cast<size_t>(layer)];
        const double gamma = param("gamma");
        if (gamma >= 1.0) return fire(layer, NAN, gamma);  // conservative setting: always refresh
        if (!prev.attn.defined() || tracked.empty()) return fire(layer, NAN, gamma);
        std::map<int64_t, int64_t> local;
        for (size_t i = 0; i < m_queries.size(); ++i) local[m_queries[i]] = static_cast<int64_t>(i);
        // Compare the tracked columns over the window rows present in both steps.
        std::vector<int64_t> now_idx, prev_idx;
        for (size_t i = 0; i < prev.rows.size(); ++i)
            if (local.count(prev.rows[i])) {
                now_idx.push_back(local[prev.rows[i]]);
                prev_idx.push_back(static_cast<int64_t>(i));
            }
        if (now_idx.empty()) return fire(layer, NAN, gamma);
        auto cols = torch::tensor(tracked);
        // (H, R, L) -> the shared rows and tracked columns only, then the head mean.
        auto a = probs.index_select(1, torch::tensor(now_idx).to(probs.device()))
                     .index_select(2, cols.to(probs.device()))
                     .mean(0)
                     .to(torch::kCPU, torch::kFloat64)
                     .reshape({-1});
        auto b =
            prev.attn.index_select(0, torch::tensor(prev_idx)).index_select(1, cols).reshape({-1});
        const double cos = torch::cosine_similarity(a, b, 0, 1e-12).item<double>();
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
    torch::Tensor m_rows;
    std::vector<PrevAttention> m_prev;
    std::vector<std::vector<int64_t>> m_tracked;
};

CL_REGISTER_POLICY(Elastic);

}  // namespace
}  // namespace cl::policies

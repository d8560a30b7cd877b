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
#include <utility>

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
        m_kv_heads = net.config().n_kv_heads;
        m_prev.assign(m_cache.size(), {});
    }
    void begin_step(const StepContext& ctx) override {
        m_ctx = ctx;
        m_full = ctx.step == 0;
        m_fired_at = m_full ? 0 : -1;
        m_queries.clear();
        // The window: the query rows of a cached step; in a full step the rows whose attention the
        // next step compares against (the first w masks of the block).
        const bool from_block = m_full || m_p.block_caching;
        m_window = first_masks(ctx, from_block ? ctx.block_start : ctx.prompt_len);
        m_is_query.assign(static_cast<size_t>(ctx.seq_len), 0);
        if (m_full) {
            push(ctx, "first-step", 0, NAN, NAN, true, "full forward");
            return;
        }
        auto add = [&](int64_t i) {
            if (!m_is_query[static_cast<size_t>(i)]) {
                m_is_query[static_cast<size_t>(i)] = 1;
                m_queries.push_back(i);
            }
        };
        for (int64_t i : m_window) add(i);
        for (const auto& prev : m_prev)
            for (int64_t i : prev.window.tracked) add(i);
        for (int32_t d : *ctx.decoded_last_step) add(d);
        std::sort(m_queries.begin(), m_queries.end());
        m_rows = detail::RowSet::from_host(m_queries, m_device);
    }
    detail::LayerPlan plan_layer(int layer) override {
        detail::LayerPlan p;
        p.write_kv = true;
        p.write_hidden = true;
        p.want_probs = true;
        p.want_probs_mean = true;           // the head means are what is read (on the CPU kernel)
        p.probs_positions = m_window;       // every row's probabilities: the window's are read
        p.window_sum_positions = m_window;  // observe_layer ranks the window's keys
        if (m_full || m_fired_at >= 0 || m_queries.empty()) return p;  // every row
        p.all_rows = false;
        p.rows = m_rows;
        p.may_escalate = true;
        // The drift test also reads last step's window rows that are still queries (decoded at
        // the previous step).
        for (int64_t q : m_prev[static_cast<size_t>(layer)].rows)
            if (m_is_query[static_cast<size_t>(q)]) p.probs_positions.push_back(q);
        std::sort(p.probs_positions.begin(), p.probs_positions.end());
        p.probs_positions.erase(std::unique(p.probs_positions.begin(), p.probs_positions.end()),
                                p.probs_positions.end());
        return p;
    }
    // The drift test at this layer, on the attention of the query rows: firing recomputes this
    // layer and every deeper one for every row.
    bool escalate(const detail::LayerResult& attention) override { return drift_test(attention); }
    void observe_layer(const detail::LayerResult& r) override {
        // Track the decoded keys the window attends to most, and remember its attention to them for
        // the next step. Plain loops on the CPU over the scores the attention kept (a dozen small
        // LibTorch ops per layer cost more than the few query rows this policy computes), kernels
        // over the (H, R, L) probabilities on a GPU.
        if (!r.probs.defined() && !r.probs_mean_at) return;  // plan_layer asks for them
        auto& prev = m_prev[static_cast<size_t>(r.layer)];
        prev.rows.clear();
        std::vector<int32_t> locals;
        for (int64_t q : m_window) {
            const int32_t local = probs_row(r, q);
            if (local < 0) continue;
            prev.rows.push_back(q);
            locals.push_back(local);
        }
        // The decoded keys the window attends to most (column sums over the window's rows, masked
        // keys excluded; the attention's own where it summed these rows) and the window's head
        // means at them: none without window rows.
        const bool summed = r.window_sum_positions == prev.rows;
        prev.window = elastic::window_attention(
            {r.probs, &r.probs_mean_at, summed ? &r.window_column_sums : nullptr}, locals,
            *m_ctx.masked, m_p.track_num, m_kv_heads);
    }
    std::vector<detail::LayerCache>& cache() override { return m_cache; }

private:
    Params m_p;
    struct PrevAttention {
        std::vector<int64_t> rows;        // window query positions
        elastic::WindowAttention window;  // the keys they attend to most, their head means there
    };
    // The first w masked positions from `from`.
    std::vector<int64_t> first_masks(const StepContext& ctx, int64_t from) const {
        std::vector<int64_t> rows;
        const auto w = static_cast<size_t>(m_p.window);
        for (int64_t i = from; i < ctx.seq_len && rows.size() < w; ++i)
            if ((*ctx.masked)[static_cast<size_t>(i)]) rows.push_back(i);
        return rows;
    }
    // The row of r's probabilities that holds position q, or -1.
    static int32_t probs_row(const detail::LayerResult& r, int64_t q) {
        const std::vector<int64_t>* rows = &r.probs_positions;
        if (rows->empty()) {
            if (r.rows == nullptr) return static_cast<int32_t>(q);  // every row: row = position
            rows = &r.rows->host;
        }
        const auto it = std::lower_bound(rows->begin(), rows->end(), q);
        return it != rows->end() && *it == q ? static_cast<int32_t>(it - rows->begin()) : -1;
    }
    bool drift_test(const detail::LayerResult& attention) {
        const int layer = attention.layer;
        const auto& prev = m_prev[static_cast<size_t>(layer)];
        const double gamma = m_p.gamma;
        if (gamma >= 1.0) return fire(layer, NAN, gamma);  // conservative setting: always refresh
        if (prev.rows.empty() || prev.window.tracked.empty()) return fire(layer, NAN, gamma);
        // Cosine of the tracked columns over the window rows present in both steps (escalation
        // tests run on the query rows only).
        std::vector<int32_t> rows_now;
        rows_now.reserve(prev.rows.size());
        for (int64_t q : prev.rows) rows_now.push_back(probs_row(attention, q));
        const auto sums =
            elastic::drift_sums({attention.probs, &attention.probs_mean_at}, rows_now, prev.window);
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
    int64_t m_kv_heads = 1;  // the window column sums' order (cuda::window_column_sums_cpu)
    StepContext m_ctx;
    bool m_full = true;
    int m_fired_at = -1;
    std::vector<int64_t> m_window, m_queries;
    std::vector<uint8_t> m_is_query;  // (L) 1 at the step's query positions
    detail::RowSet m_rows;
    std::vector<PrevAttention> m_prev;  // per layer
};

CL_REGISTER_POLICY(Elastic);

}  // namespace
}  // namespace cl::policies

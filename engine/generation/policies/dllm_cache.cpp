// Policy `dllm-cache` (dLLM-Cache, Liu et al.): a feature cache per layer (K, V, attention output,
// FFN output) for the prompt and response spans, refreshed on two intervals, plus an adaptive
// partial update of the response driven by V similarity. Follows the reference code:
// - a forward counter c counts from 1 over the whole generation; the prompt is refreshed when
//   (c-1) % K_p == 0, the response when (c-1) % K_r == 0; layer 0 is always recomputed;
// - both refresh: the full layer; response only: every response row against cached prompt K/V;
//   prompt only: every prompt row + V-verify of the response; neither: V-verify only;
// - V-verify (rho > 0): V of every response row from the live residual, the floor(rho * G) rows
//   with the lowest cosine to the cached V are recomputed (Q, K, attention, FFN); the V cache takes
//   every fresh V, the K cache only the picked rows; the cosines in float64, equal ones ranked by
//   position (row_similarity.h: the paper's code ranks float32 cosines with topk);
// - every row keeps a live residual stream: cached attention/FFN outputs are added to its input.
// Option `metric`: 0 V-cosine (paper), 1 K-cosine, 2 random picks (ablation).
#include <numeric>
#include <random>

#include "engine/generation/policies/row_similarity.h"
#include "engine/generation/policy.h"

namespace cl::policies {
namespace {

constexpr double kCosineEps = 1e-12;  // the norms' floor: only an all-zero row reaches it

class DllmCache final : public CachePolicy {
public:
    // How V-verify ranks response rows: the paper's V cosine, or ablations.
    enum class Metric : uint8_t { VCosine = 0, KCosine = 1, Random = 2 };
    struct Params {
        int64_t prompt_interval = 50;
        int64_t response_interval = 7;
        double rho = 0.25;
        Metric metric = Metric::VCosine;
        static const ParamList<Params>& list() {
            static const ParamList<Params> l{
                {"prompt_interval", &Params::prompt_interval, 1, 100000, 50,
                 "K_p: refresh prompt features every K_p forwards"},
                {"response_interval", &Params::response_interval, 1, 100000, 7,
                 "K_r: refresh response features every K_r forwards"},
                {"rho", &Params::rho, 0, 1, 0.25,
                 "share of response rows re-picked per layer by V similarity"},
                {"metric",
                 &Params::metric,
                 0,
                 2,
                 0,
                 "how V-verify ranks response rows (the paper: V cosine; others are ablations)",
                 {"v-cosine", "k-cosine", "random"}}};
            return l;
        }
    };
    static PolicyInfo static_info() {
        return {"dllm-cache",
                "dLLM-Cache: prompt/response feature caches on intervals + V-similarity partial "
                "updates",
                Params::list().specs(),
                {}};
    }
    void set_params(const std::map<std::string, double>& resolved) override {
        m_p = Params::list().read(resolved);
    }
    void on_run_start(detail::Transformer& net, int64_t seq_len) override {
        m_cache = net.make_cache(seq_len, false);
        auto opts = torch::TensorOptions().dtype(net.dtype()).device(net.device());
        for (auto& lc : m_cache) {
            lc.attn_out = torch::zeros({seq_len, net.config().d_model}, opts);
            lc.ffn_out = torch::zeros({seq_len, net.config().d_model}, opts);
        }
        m_device = net.device();
        m_seq_len = seq_len;
        m_counter = 0;
        m_probed.assign(m_cache.size(), false);
    }
    void begin_step(const StepContext& ctx) override {
        m_ctx = ctx;
        ++m_counter;
        const int64_t kp = m_p.prompt_interval, kr = m_p.response_interval;
        m_refresh_prompt = (m_counter - 1) % kp == 0;
        m_refresh_response = (m_counter - 1) % kr == 0;
        std::vector<int64_t> prompt(static_cast<size_t>(ctx.prompt_len)),
            response(static_cast<size_t>(ctx.seq_len - ctx.prompt_len));
        std::iota(prompt.begin(), prompt.end(), 0);
        std::iota(response.begin(), response.end(), ctx.prompt_len);
        m_prompt = detail::RowSet::from_host(std::move(prompt), m_device);
        m_response = detail::RowSet::from_host(std::move(response), m_device);
        std::fill(m_probed.begin(), m_probed.end(), false);
        trace::TriggerEvent e;
        e.kind = "interval";
        e.value = static_cast<double>(m_counter);
        e.fired = m_refresh_prompt || m_refresh_response;
        e.action = m_refresh_prompt && m_refresh_response ? "refresh prompt and response"
                   : m_refresh_response                   ? "refresh response, V-verify off"
                   : m_refresh_prompt                     ? "refresh prompt, V-verify response"
                                                          : "V-verify response only";
        if (ctx.triggers) ctx.triggers->push_back(e);
    }
    detail::LayerPlan plan_layer(int layer) override {
        detail::LayerPlan p;
        p.feature_cache = true;
        p.write_kv = true;
        p.write_features = true;
        if (layer == 0 || (m_refresh_prompt && m_refresh_response)) return p;  // every row
        p.all_rows = false;
        if (m_refresh_response) {
            p.rows = m_response;  // against cached prompt K/V
            return p;
        }
        p.rows = m_refresh_prompt ? m_prompt : detail::RowSet::from_host({}, m_device);
        if (m_p.rho <= 0) return p;
        p.probe = true;
        p.probe_rows = m_response;
        p.probe_k = m_p.metric == Metric::KCosine;
        return p;
    }
    // V-verify: the probe of the response rows decides which of them this layer recomputes.
    detail::RowSet select_rows(int layer, const torch::Tensor& k, const torch::Tensor& v) override {
        return verify(layer, m_p.rho, k, v);
    }
    void annotate(std::vector<trace::RowAction>& actions) const override {
        // Rows not recomputed reused their cached features; response rows of a V-verified layer
        // had their V probed.
        for (size_t l = 0; l < m_cache.size(); ++l)
            for (int64_t i = 0; i < m_seq_len; ++i) {
                auto& a = actions[l * static_cast<size_t>(m_seq_len) + static_cast<size_t>(i)];
                if (a == trace::RowAction::Recomputed) continue;
                a = (m_probed[l] && i >= m_ctx.prompt_len) ? trace::RowAction::ProbedOnly
                                                           : trace::RowAction::FeatureReused;
            }
    }
    std::vector<detail::LayerCache>& cache() override { return m_cache; }

private:
    // Observes on the host by design: the picked rows decide this layer's work.
    detail::RowSet verify(int layer, double rho, const torch::Tensor& k, const torch::Tensor& v) {
        auto& lc = m_cache[static_cast<size_t>(layer)];
        m_probed[static_cast<size_t>(layer)] = true;
        const int64_t G = m_response.size();
        const auto n = static_cast<int64_t>(std::floor(rho * static_cast<double>(G)));
        std::vector<int64_t> picked;
        double mean_sim = NAN;
        // Ranked by V, the cosines' loop writes the fresh V into the V cache as it goes.
        const bool v_taken = n > 0 && m_p.metric == Metric::VCosine;
        if (n > 0) {
            std::vector<int64_t> order;  // response indices, the picked first
            if (m_p.metric == Metric::Random) {
                order.resize(static_cast<size_t>(G));
                std::iota(order.begin(), order.end(), 0);
                std::shuffle(order.begin(), order.end(),
                             std::mt19937_64(static_cast<uint64_t>(m_counter * 131 + layer)));
            } else {
                const bool by_k = m_p.metric == Metric::KCosine;
                const auto& fresh = by_k ? k : v;         // (Hkv, G, Dh)
                const auto& cached = by_k ? lc.k : lc.v;  // (Hkv, L, Dh)
                const auto sims = similarity::row_cosines(fresh, cached, m_ctx.prompt_len,
                                                          kCosineEps, v_taken);  // (G)
                mean_sim = std::accumulate(sims.begin(), sims.end(), 0.0) /
                           static_cast<double>(sims.size());
                order = similarity::least_similar_first(sims, static_cast<size_t>(n));
            }
            for (int64_t i = 0; i < std::min(n, G); ++i)
                picked.push_back(m_ctx.prompt_len + order[static_cast<size_t>(i)]);
        }
        // The V cache takes the fresh V of every response row; K only for the picked rows (below).
        if (!v_taken) lc.v.narrow(1, m_ctx.prompt_len, G).copy_(v);  // response rows: [P, L)
        std::vector<int64_t> rows;
        if (m_refresh_prompt)
            for (int64_t i = 0; i < m_ctx.prompt_len; ++i) rows.push_back(i);
        std::sort(picked.begin(), picked.end());
        rows.insert(rows.end(), picked.begin(), picked.end());
        if (m_ctx.triggers) {
            trace::TriggerEvent e;
            e.kind = "v-verify";
            e.layer = layer;
            e.value = mean_sim;
            e.threshold = rho;
            e.fired = !picked.empty();
            e.action =
                "recompute " + std::to_string(picked.size()) + " least-similar response rows";
            m_ctx.triggers->push_back(e);
        }
        return detail::RowSet::from_host(std::move(rows), m_device);
    }

    Params m_p;
    std::vector<detail::LayerCache> m_cache;
    torch::Device m_device{torch::kCPU};
    int64_t m_seq_len = 0;
    int64_t m_counter = 0;
    bool m_refresh_prompt = true, m_refresh_response = true;
    StepContext m_ctx;
    detail::RowSet m_prompt, m_response;  // (P), (G) positions
    std::vector<bool> m_probed;           // per layer: V-verify ran this step
};

CL_REGISTER_POLICY(DllmCache);

}  // namespace
}  // namespace cl::policies

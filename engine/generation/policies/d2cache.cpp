// Policy `d2cache` (d2Cache, ICLR 2026): two-stage token selection, the same rows at every layer.
// Stage 1, M*: the k masked rows with the highest certainty-prior score D(i) x confidence (the
// confidence of rows not recomputed is carried from the step that last computed them), plus the
// rows decoded at the previous step. Stage 2, U: attention rollout over the previous step's
// head-mean attention (identity for rows that were not computed, + I, row-normalised, chained over
// layers); influence = column sums; U = the nucleus (cumulative share <= p, at least one) of the
// most influential rows not selected yet. The first step is full. Only recomputed masked rows can
// be decoded (the sampler enforces this for every policy). `inflate_w` adds the masked neighbours
// within w positions of each M* row.
#include <algorithm>

#include "engine/cuda/certainty_density.h"
#include "engine/cuda/ranking.h"
#include "engine/generation/policies/attention_rollout.h"
#include "engine/generation/policies/row_set_policy.h"

namespace cl::policies {
namespace {

// (influence, position) pairs in select_top_k_cpu's order (engine/cuda/ranking.h: descending,
// equal ones by position), for the nucleus, taken off a heap in that order: it is a few rows of
// hundreds, and sorting them all was most of the choice's time outside the certainty prior.
using Ranked = std::pair<double, int64_t>;
bool ranks_before(const Ranked& a, const Ranked& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
}

class D2Cache final : public RowSetPolicy {
public:
    struct Params {
        int64_t k = 32;
        double p = 0.1;
        double sigma = 10;
        int64_t inflate_w = 0;
        static const ParamList<Params>& list() {
            static const ParamList<Params> l{
                {"k", &Params::k, 1, 65536, 32, "masked rows recomputed per step (stage 1)"},
                {"p", &Params::p, 0, 1, 0.1, "nucleus share of rollout influence (stage 2)"},
                {"sigma", &Params::sigma, 0.1, 1000, 10, "width of the certainty-prior kernel"},
                {"inflate_w", &Params::inflate_w, 0, 64, 0,
                 "also recompute masked rows within w of each selected row (0 in the paper)"}};
            return l;
        }
    };
    static PolicyInfo static_info() {
        return {
            "d2cache",
            "d2Cache: top-k masked by certainty prior + just decoded + attention-rollout nucleus",
            Params::list().specs(),
            {.certainty_prior = true}};
    }
    void set_params(const std::map<std::string, double>& resolved) override {
        m_p = Params::list().read(resolved);
    }
    void on_run_start(detail::Transformer& net, int64_t seq_len) override {
        RowSetPolicy::on_run_start(net, seq_len);
        m_influence.assign(static_cast<size_t>(seq_len), 0.0);
        m_have_influence = false;
    }
    void observe_layer(const detail::LayerResult& r) override {
        // Accumulate the rollout backwards at the step's end; keep this step's attention per
        // layer where it was computed (on a GPU no layer waits for a copy to the host).
        if (r.layer == 0) m_layers.clear();
        m_layers.push_back(r.rows ? rollout::keep(r.head_mean, r.rows->device, r.rows->host)
                                  : rollout::keep(r.head_mean, {}, {}));
    }
    void on_step_end(const StepContext& ctx, const std::vector<int32_t>& /*committed*/) override {
        m_influence = rollout::influence(m_layers, ctx.seq_len);
        m_have_influence = true;
    }

protected:
    bool wants_head_mean() const override { return true; }

    RowChoice choose(const StepContext& ctx) override {
        if (ctx.step == 0 || !m_have_influence) return full_choice("first-step");
        const int64_t L = ctx.seq_len;
        const auto k = static_cast<size_t>(m_p.k);
        const double p = m_p.p, sigma = m_p.sigma;
        const int64_t inflate = m_p.inflate_w;
        // Stage 1: certainty prior x (carried) confidence over every masked row, the top k by
        // the engine's one ranking.
        const uint8_t* masked = ctx.masked->data();
        std::vector<double> score(static_cast<size_t>(L), 0.0);  // (L)
        cuda::certainty_density_cpu(
            masked, L, {.begin = 0, .end = L, .sigma = sigma, .masked_only = true}, score.data());
        for (int64_t i = 0; i < L; ++i) {
            const auto at = static_cast<size_t>(i);
            score[at] *=
                masked[i] && (*ctx.last_prediction)[at] >= 0 ? (*ctx.last_confidence)[at] : 0.0;
        }
        RowChoice c;
        std::vector<uint8_t> selected(static_cast<size_t>(L), 0);
        auto add = [&](int64_t i) {
            if (!selected[static_cast<size_t>(i)]) {
                selected[static_cast<size_t>(i)] = 1;
                c.rows.push_back(i);
            }
        };
        for (const int64_t pos :
             cuda::select_top_k_cpu(score.data(), masked, L, {.k = static_cast<int64_t>(k)})) {
            add(pos);
            for (int64_t j = std::max<int64_t>(0, pos - inflate);
                 j <= std::min(L - 1, pos + inflate); ++j)
                if (masked[j]) add(j);
        }
        // The current block must stay decodable: its best masked row is always in M*.
        const int64_t b0 = ctx.block_start, b1 = std::min<int64_t>(ctx.block_end, L);
        if (b0 < b1)
            for (const int64_t pos :
                 cuda::select_top_k_cpu(score.data() + b0, masked + b0, b1 - b0, {.k = 1}))
                add(b0 + pos);
        for (int32_t d : *ctx.decoded_last_step) add(d);
        const size_t stage1 = c.rows.size();
        // Stage 2: nucleus of rollout influence over the rows not selected yet.
        std::vector<Ranked> rest;
        double total = 0;
        for (int64_t i = 0; i < L; ++i)
            if (!selected[static_cast<size_t>(i)]) {
                rest.emplace_back(m_influence[static_cast<size_t>(i)], i);
                total += m_influence[static_cast<size_t>(i)];
            }
        // Taken in rank order off a heap (its top ranks first): the nucleus is a few rows.
        const auto after = [](const Ranked& a, const Ranked& b) { return ranks_before(b, a); };
        std::make_heap(rest.begin(), rest.end(), after);
        double cum = 0;
        for (size_t taken = 0; !rest.empty(); ++taken) {
            std::pop_heap(rest.begin(), rest.end(), after);
            const Ranked next = rest.back();
            rest.pop_back();
            const double share = total > 0 ? next.first / total : 0;
            if (taken > 0 && cum + share > p + 1e-12) break;
            cum += share;
            add(next.second);
        }
        c.reason = "selection";
        c.detail = "M* " + std::to_string(stage1) + " rows (k " + std::to_string(k) +
                   " + just decoded), U " + std::to_string(c.rows.size() - stage1) +
                   " rows (rollout nucleus " + std::to_string(cum).substr(0, 5) + ")";
        if (ctx.triggers) {
            trace::TriggerEvent e;
            e.kind = "rollout-nucleus";
            e.value = cum;
            e.threshold = p;
            e.fired = c.rows.size() > stage1;
            e.action = "U = " + std::to_string(c.rows.size() - stage1) + " rows";
            ctx.triggers->push_back(e);
        }
        return c;
    }

private:
    Params m_p;
    std::vector<rollout::LayerAttention> m_layers;  // this step's, by layer
    std::vector<double> m_influence;                // (L) column sums of the last step's rollout
    bool m_have_influence = false;
};

CL_REGISTER_POLICY(D2Cache);

}  // namespace
}  // namespace cl::policies

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
#include <cmath>
#include <numeric>

#include "engine/cuda/certainty_density.h"
#include "engine/generation/policies/attention_rollout.h"
#include "engine/generation/policies/row_set_policy.h"

namespace cl::policies {
namespace {

// (value, position) pairs in the order of a stable sort by descending value over ascending
// positions (equal values by position), NaN last: a strict total order, so a partial sort's or a
// heap's first ones are the full sort's: the choice sorted every masked row for its top k and
// every other row for a nucleus of a few, both on the engine thread.
using Ranked = std::pair<double, int64_t>;
bool ranks_before(const Ranked& a, const Ranked& b) {
    const bool a_nan = std::isnan(a.first), b_nan = std::isnan(b.first);
    if (a_nan != b_nan) return b_nan;
    if (!a_nan && a.first != b.first) return a.first > b.first;
    return a.second < b.second;
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
        // Stage 1: certainty prior x (carried) confidence over every masked row.
        std::vector<Ranked> scored;
        std::vector<double> density(static_cast<size_t>(L), 0.0);
        cuda::certainty_density_cpu(ctx.masked->data(), L,
                                    {.begin = 0, .end = L, .sigma = sigma, .masked_only = true},
                                    density.data());
        for (int64_t i = 0; i < L; ++i) {
            if (!(*ctx.masked)[static_cast<size_t>(i)]) continue;
            const double conf = (*ctx.last_prediction)[static_cast<size_t>(i)] >= 0
                                    ? (*ctx.last_confidence)[static_cast<size_t>(i)]
                                    : 0.0;
            scored.emplace_back(density[static_cast<size_t>(i)] * conf, i);
        }
        const size_t top = std::min(k, scored.size());
        std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(top),
                          scored.end(), ranks_before);
        RowChoice c;
        std::vector<uint8_t> selected(static_cast<size_t>(L), 0);
        auto add = [&](int64_t i) {
            if (!selected[static_cast<size_t>(i)]) {
                selected[static_cast<size_t>(i)] = 1;
                c.rows.push_back(i);
            }
        };
        for (size_t i = 0; i < top; ++i) {
            const int64_t pos = scored[i].second;
            add(pos);
            for (int64_t j = std::max<int64_t>(0, pos - inflate);
                 j <= std::min(L - 1, pos + inflate); ++j)
                if ((*ctx.masked)[static_cast<size_t>(j)]) add(j);
        }
        // The current block must stay decodable: its best masked row is always in M*.
        const Ranked* best = nullptr;
        for (const auto& e : scored)
            if (e.second >= ctx.block_start && e.second < ctx.block_end &&
                (!best || ranks_before(e, *best)))
                best = &e;
        if (best) add(best->second);
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

// Policy `block-cache`: the noise-process-agnostic block cache of "KV Caching for dLLMs is Noise
// Process Agnostic" (the blog's uniform-noise engine; Fast-dLLM's dual cache for masked models).
// A full forward at each block start caches every row; later steps of the block recompute only the
// active block and reuse the prompt, the finished blocks and (with `cache_future`) the blocks after
// it. A full refresh also runs every `refresh_interval` steps of a block, and when the drift test
// fires: the fraction of the active block's tokens that changed since the last full forward
// reaches `change_trigger` (the changed tokens are what moves the cached rows' K/V).
#include "engine/generation/policies/row_set_policy.h"

namespace cl::policies {
namespace {

class BlockCache final : public RowSetPolicy {
public:
    struct Params {
        int64_t refresh_interval = 8;
        double change_trigger = 0.0;
        bool cache_future = true;
        static const ParamList<Params>& list() {
            static const ParamList<Params> l{
                {"refresh_interval", &Params::refresh_interval, 0, 1024, 8,
                 "R: a full forward every R steps of a block (0 = only at block start)"},
                {"change_trigger", &Params::change_trigger, 0, 1, 0,
                 "refresh when this fraction of the block changed since the last full forward "
                 "(0 = off)"},
                {"cache_future", &Params::cache_future, 0, 1, 1,
                 "1 = reuse the blocks after the active one too (dual); 0 = recompute them"}};
            return l;
        }
    };
    static PolicyInfo static_info() {
        return {"block-cache",
                "Block cache (noise-agnostic): reuse prompt, finished and future blocks, recompute "
                "the active block; refresh every R steps or on block change",
                Params::list().specs(),
                // The blog's engine updates in parallel: every position scoring >= 0.9 per step.
                {.threshold = 0.9}};
    }
    void set_params(const std::map<std::string, double>& resolved) override {
        m_p = Params::list().read(resolved);
    }

protected:
    RowChoice choose(const StepContext& ctx) override {
        if (ctx.step_in_block == 0) {
            remember_tokens(ctx);
            return full_choice("block-start", "full forward, every row cached");
        }
        const int64_t r = m_p.refresh_interval;
        if (r > 0 && ctx.step_in_block % r == 0) {
            remember_tokens(ctx);
            return full_choice("interval",
                               "full forward every " + std::to_string(r) + " steps of a block");
        }
        const double changed = changed_fraction(ctx);
        if (m_p.change_trigger > 0) {
            trace::TriggerEvent e;
            e.kind = "drift";
            e.value = changed;
            e.threshold = m_p.change_trigger;
            e.fired = changed >= m_p.change_trigger;
            e.action = e.fired ? "block changed: full refresh" : "reuse";
            if (ctx.triggers) ctx.triggers->push_back(e);
            if (e.fired) {
                remember_tokens(ctx);
                return full_choice("drift", "full forward: the block changed since the last one");
            }
        }
        RowChoice c;
        c.rows = range(ctx.block_start, m_p.cache_future ? ctx.block_end : ctx.seq_len);
        c.reason = "block-cache";
        c.detail = m_p.cache_future ? "recompute the active block only"
                                    : "recompute the active block and everything after it";
        return c;
    }

private:
    void remember_tokens(const StepContext& ctx) { m_tokens_at_full = *ctx.tokens; }
    double changed_fraction(const StepContext& ctx) const {
        int64_t changed = 0;
        for (int64_t i = ctx.block_start; i < ctx.block_end; ++i)
            changed +=
                (*ctx.tokens)[static_cast<size_t>(i)] != m_tokens_at_full[static_cast<size_t>(i)];
        return static_cast<double>(changed) / static_cast<double>(ctx.block_end - ctx.block_start);
    }

    Params m_p;
    std::vector<int32_t> m_tokens_at_full;  // (L) the tokens the cache was last built from
};

CL_REGISTER_POLICY(BlockCache);

}  // namespace
}  // namespace cl::policies

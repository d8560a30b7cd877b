// Policy `dkv-decode` (dKV-Cache-Decode, Ma et al. 2025): delayed caching of decoded tokens.
// A token's K/V are cached one step after it is decoded (its first forward as a real token), so
// each step recomputes M_{t-1} = still-masked rows + rows decoded at the previous step. Steps 0
// and 1 of every block are full (the cache is rebuilt at step 1), and so is every step of the
// block whose index is a multiple of N (the reference code's schedule: 0, 1, N, 2N, ...).
// Options: `delay` 0 is the paper's no-delay ablation (decoded rows keep the K/V they had as
// masks); `block_reset` 0 counts N over the whole run (steps 0, N, 2N, ...) with no block rebuild.
#include "engine/generation/policies/row_set_policy.h"

namespace cl::policies {
namespace {

class DkvDecode final : public RowSetPolicy {
public:
    struct Params {
        int64_t refresh_interval = 8;
        bool delay = true;
        bool block_reset = true;
        static const ParamList<Params>& list() {
            static const ParamList<Params> l{
                {"refresh_interval", &Params::refresh_interval, 1, 1024, 8,
                 "N: a full forward every N steps"},
                {"delay", &Params::delay, 0, 1, 1,
                 "1 = one-step delayed caching; 0 = no-delay ablation (stale K/V of new tokens)"},
                {"block_reset", &Params::block_reset, 0, 1, 1,
                 "1 = steps 0 and 1 of each block are full forwards"}};
            return l;
        }
    };
    static PolicyInfo static_info() {
        return {"dkv-decode",
                "dKV-Cache-Decode: reuse K/V of tokens decoded >= 2 steps ago and of the prompt; "
                "refresh every N steps",
                Params::list().specs(),
                {}};
    }
    void set_params(const std::map<std::string, double>& resolved) override {
        m_p = Params::list().read(resolved);
    }

protected:
    RowChoice choose(const StepContext& ctx) override {
        const int64_t n = m_p.refresh_interval;
        if (ctx.step == 0) return full_choice("first-step");
        if (m_p.block_reset && ctx.step_in_block <= 1)
            return full_choice("block-start", ctx.step_in_block == 0
                                                  ? "full forward at block start"
                                                  : "cache rebuilt (step 1 of block)");
        // dKV-Cache's decode loop refreshes when the block's step index is a multiple of N (the
        // reference's `i % cache_reloading_step == 0`), not N steps after the step-1 rebuild.
        const int64_t step = m_p.block_reset ? ctx.step_in_block : ctx.step;
        if (step % n == 0)
            return full_choice("interval", "full forward every " + std::to_string(n) + " steps");
        RowChoice c;
        c.rows = masked_rows(ctx);
        if (m_p.delay) append(c.rows, *ctx.decoded_last_step);
        c.reason = "delayed-cache";
        c.detail =
            m_p.delay ? "recompute masked + decoded last step" : "recompute masked only (no delay)";
        return c;
    }

private:
    Params m_p;
};

CL_REGISTER_POLICY(DkvDecode);

}  // namespace
}  // namespace cl::policies

// Policy `dkv-greedy` (dKV-Cache-Greedy): recompute only D_t (the rows decoded this step, known in
// advance under random remasking), D_{t-1}, and a window of w positions around D_{t-1}; everything
// else, other masks included, is reused stale. A full forward at the steps 0, N, 2N, ... of every
// block. Lossy by design.
// When the commit order is not known in advance (low-confidence remasking), D_t is replaced by
// the current block's masked rows, and the step's trigger says so.
#include "engine/generation/policies/row_set_policy.h"

namespace cl::policies {
namespace {

class DkvGreedy final : public RowSetPolicy {
public:
    struct Params {
        int64_t refresh_interval = 2;
        int64_t window = 4;
        static const ParamList<Params>& list() {
            static const ParamList<Params> l{{"refresh_interval", &Params::refresh_interval, 1,
                                              1024, 2, "N: a full forward every N steps"},
                                             {"window", &Params::window, 0, 4096, 4,
                                              "w: positions on each side of D_{t-1} recomputed"}};
            return l;
        }
    };
    static PolicyInfo static_info() {
        return {"dkv-greedy",
                "dKV-Cache-Greedy: recompute D_t, D_{t-1} and a window around D_{t-1}; full every "
                "N (needs random remasking)",
                Params::list().specs(),
                {.remasking = Remasking::Random}};
    }
    void set_params(const std::map<std::string, double>& resolved) override {
        m_p = Params::list().read(resolved);
    }

protected:
    RowChoice choose(const StepContext& ctx) override {
        const int64_t n = m_p.refresh_interval;
        const int64_t w = m_p.window;
        if (ctx.step == 0) return full_choice("first-step");
        // The reference starts every block without a cache and refreshes at the block's steps
        // 0, N, 2N, ... (`i % cache_reloading_step == 0`).
        if (ctx.step_in_block % n == 0)
            return full_choice(ctx.step_in_block == 0 ? "block-start" : "interval",
                               "full forward every " + std::to_string(n) + " steps of a block");
        RowChoice c;
        c.reason = "greedy-window";
        if (ctx.planned_commits && !ctx.planned_commits->empty()) {
            append(c.rows, *ctx.planned_commits);
            c.detail = "recompute D_t, D_{t-1} and a window of " + std::to_string(w);
        } else {
            c.rows = masked_rows(ctx, ctx.block_start, ctx.block_end);
            c.detail =
                "order unknown (not random remasking): current block's masks stand in for D_t";
        }
        for (int32_t d : *ctx.decoded_last_step)
            for (int64_t i = std::max<int64_t>(0, d - w);
                 i <= std::min<int64_t>(ctx.seq_len - 1, d + w); ++i)
                c.rows.push_back(i);
        return c;
    }

private:
    Params m_p;
};

CL_REGISTER_POLICY(DkvGreedy);

}  // namespace
}  // namespace cl::policies

// Policy `dkv-prefill` (dKV-Cache-Prefill): the prompt's K/V are computed once at the first step
// and never refreshed; every response row is recomputed at every step.
#include "engine/generation/policies/row_set_policy.h"

namespace cl::policies {
namespace {

class DkvPrefill final : public RowSetPolicy {
public:
    static PolicyInfo static_info() {
        return {"dkv-prefill",
                "dKV-Cache-Prefill: prompt K/V cached forever, all response rows recomputed",
                {},
                {}};
    }

protected:
    RowChoice choose(const StepContext& ctx) override {
        if (ctx.step == 0) return full_choice("first-step");
        RowChoice c;
        c.rows = range(ctx.prompt_len, ctx.seq_len);
        c.reason = "prefill-cache";
        c.detail = "recompute the response, reuse prompt K/V";
        return c;
    }
};

CL_REGISTER_POLICY(DkvPrefill);

}  // namespace
}  // namespace cl::policies

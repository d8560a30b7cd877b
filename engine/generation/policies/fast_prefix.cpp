// Policy `fast-prefix` (Fast-dLLM prefix cache): a full forward at each block start caches the K/V
// of the prefix [0, s); later steps of the block recompute [s, L) (the block and every later mask).
#include "engine/generation/policies/row_set_policy.h"

namespace cl::policies {
namespace {

class FastPrefix final : public RowSetPolicy {
public:
    static PolicyInfo static_info() {
        return {"fast-prefix",
                "Fast-dLLM prefix cache: reuse prefix K/V from the block start, recompute [s, L)",
                {},
                {.threshold = 0.9}};
    }

protected:
    RowChoice choose(const StepContext& ctx) override {
        if (ctx.step_in_block == 0)
            return full_choice("block-start", "full forward, prefix K/V cached");
        RowChoice c;
        c.rows = range(ctx.block_start, ctx.seq_len);
        c.reason = "prefix-cache";
        c.detail = "recompute block and suffix, reuse prefix";
        return c;
    }
};

CL_REGISTER_POLICY(FastPrefix);

}  // namespace
}  // namespace cl::policies

// Policy `fast-dual` (Fast-dLLM dual cache): a full forward at each block start caches prefix and
// suffix K/V; later steps of the block recompute only the current block [s, e).
#include "engine/generation/policies/row_set_policy.h"

namespace cl::policies {
namespace {

class FastDual final : public RowSetPolicy {
public:
    static PolicyInfo static_info() {
        return {"fast-dual",
                "Fast-dLLM dual cache: reuse prefix and suffix K/V from the block start, recompute "
                "the block",
                {},
                {.threshold = 0.9}};
    }

protected:
    RowChoice choose(const StepContext& ctx) override {
        if (ctx.step_in_block == 0)
            return full_choice("block-start", "full forward, prefix and suffix K/V cached");
        RowChoice c;
        c.rows = range(ctx.block_start, ctx.block_end);
        c.reason = "dual-cache";
        c.detail = "recompute the current block only";
        return c;
    }
};

CL_REGISTER_POLICY(FastDual);

}  // namespace
}  // namespace cl::policies

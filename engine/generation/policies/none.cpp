// Policy `none`: the uncached baseline. Every layer recomputes every row at every step
// (LLaDA generate.py). Nothing is cached, so the plan never writes K/V.
#include "engine/generation/policy.h"

namespace cl {
namespace {

class NonePolicy final : public CachePolicy {
public:
    static PolicyInfo static_info() {
        return {"none", "Uncached baseline: full forward over all rows every step.", {}, {}};
    }
    void on_run_start(detail::Transformer& net, int64_t seq_len) override {
        m_cache.assign(static_cast<size_t>(net.config().n_layers), {});
    }
    void begin_step(const StepContext& ctx) override {}
    detail::LayerPlan plan_layer(int layer) override {
        detail::LayerPlan p;
        p.all_rows = true;
        p.write_kv = false;  // nothing is ever reused
        return p;
    }
    std::vector<detail::LayerCache>& cache() override { return m_cache; }

private:
    std::vector<detail::LayerCache> m_cache;
};

CL_REGISTER_POLICY(NonePolicy);

}  // namespace
}  // namespace cl

// CachePolicy: the interface every cache policy implements (one file per policy, in policies/).
//
// A policy takes part in each denoising step through hooks: step hooks (block start, begin step,
// step end, block end) and per-layer hooks that the plan forward calls (plan_layer: which rows
// this layer computes and what it writes; select_rows: after a probe of the live residual;
// escalate: after the attention of the planned rows; observe_layer: after the layer). It explains
// its decisions as TriggerEvents and per-(layer, row) actions. Internal: includes torch.
#pragma once

#include <functional>
#include <memory>

#include "engine/generation/policy_params.h"
#include "engine/generation/policy_registry.h"
#include "engine/model/transformer.h"
#include "engine/trace/trace_types.h"

namespace cl {

// What the engine tells a policy about the current step (before its forward).
struct StepContext {
    int32_t step = 0;  // global step index
    int32_t block = 0;
    int32_t step_in_block = 0;
    int64_t prompt_len = 0;   // P
    int64_t seq_len = 0;      // L
    int64_t block_start = 0;  // [block_start, block_end) absolute positions
    int64_t block_end = 0;
    const std::vector<int32_t>* tokens = nullptr;             // (L) before this step
    const std::vector<uint8_t>* masked = nullptr;             // (L) 1 = still [MASK]
    const std::vector<int32_t>* decoded_last_step = nullptr;  // D_{t-1} positions
    std::vector<trace::TriggerEvent>* triggers = nullptr;     // append explanations here
    const std::vector<int32_t>* last_prediction =
        nullptr;  // (L) latest prediction per masked row, -1 none
    const std::vector<double>* last_confidence = nullptr;  // (L) its confidence
    // Positions the sampler will commit this step when that is known before the forward (random
    // remasking with a fixed schedule): dKV-Cache-Greedy needs it. Empty otherwise.
    const std::vector<int32_t>* planned_commits = nullptr;
    bool certainty_prior = false;
    double certainty_sigma = 10.0;
    int64_t steps_per_block = 0;
};

class CachePolicy {
public:
    virtual ~CachePolicy() = default;
    // The registered catalogue entry (set by create_policy).
    const PolicyInfo& info() const { return *m_info; }
    // Resolved, validated values (resolve_policy_params); a policy with parameters reads them
    // into its typed struct here (policy_params.h).
    virtual void set_params(const std::map<std::string, double>& resolved) {}

    // Called once before the first step; allocate caches on the model's device here.
    virtual void on_run_start(detail::Transformer& net, int64_t seq_len) = 0;
    virtual void on_block_start(const StepContext& ctx) {}
    // Called before the step's forward; the policy fixes (or starts fixing) its plan here.
    virtual void begin_step(const StepContext& ctx) = 0;

    // ---- per-layer hooks, called by the plan forward -------------------------------------
    // Asked just before layer l runs.
    virtual detail::LayerPlan plan_layer(int layer) = 0;
    // After the probe a plan asked for (feature mode): the rows to compute.
    virtual detail::RowSet select_rows(int layer, const torch::Tensor& probe_k,
                                       const torch::Tensor& probe_v);
    // After the attention of the planned rows (plans with may_escalate): true recomputes the layer
    // for every row. attention: its layer, rows and probabilities (of probs_positions when the
    // plan named some and nobody asked for every row's).
    virtual bool escalate(const detail::LayerResult& attention) { return false; }
    // Just after layer l ran (probabilities present when the plan asked for them).
    virtual void observe_layer(const detail::LayerResult& result) {}

    virtual std::vector<detail::LayerCache>& cache() = 0;
    // Per-(layer, row) action overrides for the trace (default: computed rows Recomputed, other
    // rows KvReused). `actions` is (N, L) row-major.
    virtual void annotate(std::vector<trace::RowAction>& actions) const {}
    virtual void on_step_end(const StepContext& ctx, const std::vector<int32_t>& committed) {}
    virtual void on_block_end(const StepContext& ctx) {}

private:
    friend std::unique_ptr<CachePolicy> create_policy(const std::string&,
                                                      const std::map<std::string, double>&);
    const PolicyInfo* m_info = nullptr;
};

using PolicyFactory = std::function<std::unique_ptr<CachePolicy>()>;

// Registers a policy at static-initialisation time; returns true so it can initialise a constant.
bool register_policy(const PolicyInfo& info, PolicyFactory factory);
// Creates a policy with resolved parameters; throws InputError for unknown names.
std::unique_ptr<CachePolicy> create_policy(const std::string& name,
                                           const std::map<std::string, double>& params);

#define CL_REGISTER_POLICY(Type)             \
    static const bool cl_registered_##Type = \
        ::cl::register_policy(Type::static_info(), [] { return std::make_unique<Type>(); })

}  // namespace cl

// Running a policy on a model for the invariant tests (tests/test_policies.cpp for LLaDA,
// tests/test_dream.cpp for Dream): the run's summary and step records, and the check that a
// policy at its most conservative settings reproduces the uncached baseline.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/generation/generator.h"
#include "engine/trace/trace_store.h"

namespace cl::test {

struct PolicyRun {
    trace::RunSummary summary;
    std::vector<std::shared_ptr<const trace::StepRecord>> steps;
};

// The invariant tests' sampler: G = 32 in blocks of 16, one token per step, low confidence.
inline GenerationConfig policy_test_config(int64_t G = 32, int64_t B = 16, int64_t T = 32) {
    GenerationConfig c;
    c.gen_length = G;
    c.block_length = B;
    c.steps = T;
    return c;
}

inline PolicyRun run_policy_with(const std::shared_ptr<Model>& model, const std::string& policy,
                                 std::map<std::string, double> params,
                                 const GenerationConfig& config, bool oracle = false) {
    GenerationRequest r;
    r.prompt_text = "Remember: abc=123, xyz=987. What is abc?";
    r.config = config;
    r.policy = policy;
    r.params = std::move(params);
    trace::TraceStore store;
    store.set_want_oracle(oracle);
    Generator g(model, r, &store);
    PolicyRun out;
    out.summary = g.run();
    out.steps = store.steps(0);
    return out;
}

inline PolicyRun run_policy(const std::shared_ptr<Model>& model, const std::string& policy,
                            std::map<std::string, double> params = {}, int64_t G = 32,
                            int64_t B = 16, int64_t T = 32, bool oracle = false,
                            Remasking remasking = Remasking::LowConfidence) {
    GenerationConfig c = policy_test_config(G, B, T);
    c.remasking = remasking;
    return run_policy_with(model, policy, std::move(params), c, oracle);
}

// The final tokens and every step's confidences equal the baseline's (`none`) under `config`.
inline void expect_same_as_baseline(const std::shared_ptr<Model>& model, const std::string& policy,
                                    const std::map<std::string, double>& params,
                                    const GenerationConfig& config = policy_test_config()) {
    SCOPED_TRACE(policy);
    const PolicyRun base = run_policy_with(model, "none", {}, config);
    const PolicyRun got = run_policy_with(model, policy, params, config);
    EXPECT_EQ(got.summary.final_tokens, base.summary.final_tokens);
    ASSERT_EQ(got.steps.size(), base.steps.size());
    for (size_t t = 0; t < base.steps.size(); ++t)
        for (size_t i = 0; i < base.steps[t]->confidence.size(); ++i) {
            const float a = base.steps[t]->confidence[i], b = got.steps[t]->confidence[i];
            if (std::isnan(a) || std::isnan(b)) continue;  // rows a policy did not predict
            EXPECT_NEAR(a, b, 1e-4) << "step " << t << " row " << i;
        }
}

// Each policy at the settings that make it recompute everything it caches.
inline const std::map<std::string, std::map<std::string, double>>& conservative_settings() {
    static const std::map<std::string, std::map<std::string, double>> s = {
        {"dkv-decode", {{"refresh_interval", 1}}},
        {"dkv-greedy", {{"refresh_interval", 1}}},
        {"dllm-cache", {{"prompt_interval", 1}, {"response_interval", 1}}},
        {"d2cache", {{"k", 4096}, {"p", 1.0}}},
        {"elastic", {{"gamma", 1.0}}},
        {"block-cache", {{"refresh_interval", 1}}},
    };
    return s;
}

}  // namespace cl::test

// The catalogue of cache policies, torch-free: names, summaries and parameter specs, so the CLI
// and the app can list and validate policies without including LibTorch.
//
// Adding a policy is one new file in engine/generation/policies/ that registers itself with
// CL_REGISTER_POLICY (see policy.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/generation/generation_config.h"

namespace cl {

struct ParamSpec {
    std::string name;
    double default_value = 0;  // the paper / reference code default
    double min = 0;
    double max = 0;
    bool integer = false;
    std::string help;
};

struct PolicyInfo {
    std::string name;
    std::string summary;
    std::vector<ParamSpec> params;
    // Sampler settings the policy's paper uses by default (e.g. Fast-dLLM's threshold 0.9);
    // applied by `bench` in "own decoding" mode, never silently.
    std::map<std::string, double> own_decoding;
};

std::vector<PolicyInfo> list_policies();
// Returns nullptr when unknown.
const PolicyInfo* find_policy(const std::string& name);
// Validates names and ranges; throws InputError naming "--param" and the bad key or value.
std::map<std::string, double> resolve_policy_params(const std::string& policy,
                                                    const std::map<std::string, double>& overrides);
// Applies a policy's own decoding defaults (e.g. Fast-dLLM threshold 0.9) to `config`; unknown
// policies leave it unchanged. One definition for every front end and the golden-token test.
GenerationConfig apply_own_decoding(GenerationConfig config, const std::string& policy);

}  // namespace cl

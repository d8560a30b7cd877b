// The catalogue of cache policies, torch-free: names, summaries and parameter specs, so the CLI
// and the app can list and validate policies without including LibTorch.
//
// Adding a policy is one new file in engine/generation/policies/ that registers itself with
// CL_REGISTER_POLICY (see policy.h).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/generation/generation_config.h"

namespace cl {

// What kind of value a parameter holds; decides validation, the CLI's listing and the widget.
enum class ParamType : uint8_t {
    Integer,  // a count or interval
    Real,     // a threshold or share
    Switch,   // 0 or 1 (on/off ablations)
    Choice,   // 0 .. choices.size()-1, each with a label
};
const char* to_string(ParamType t);

// One parameter as a policy declares it (engine/generation/policy_params.h builds these from
// the policy's typed parameter struct): the CLI's --param, the app's sliders, validation and the
// values recorded in sessions all come from here.
struct ParamSpec {
    std::string name;
    ParamType type = ParamType::Real;
    double min = 0;
    double max = 0;
    double default_value = 0;  // what a run uses unless told otherwise
    double paper_default = 0;  // the paper's / reference code's value ("Reset to paper defaults")
    std::vector<std::string> choices;  // Choice: the label of each value
    std::string help;                  // one line

    bool integral() const { return type != ParamType::Real; }
};

// Sampler settings a policy's paper uses (e.g. Fast-dLLM's threshold 0.9), typed so that a
// misspelt setting cannot exist; applied in "own decoding" mode only, never silently.
struct OwnDecoding {
    // Unset: the run's own setting.
    std::optional<double> threshold{};
    std::optional<bool> certainty_prior{};
    std::optional<Remasking> remasking{};

    bool empty() const { return !threshold && !certainty_prior && !remasking; }
    std::string describe() const;  // e.g. "threshold = 0.9"; empty when empty()
};

struct PolicyInfo {
    std::string name;
    std::string summary;
    std::vector<ParamSpec> params;
    OwnDecoding own_decoding;
};

std::vector<PolicyInfo> list_policies();
// Returns nullptr when unknown.
const PolicyInfo* find_policy(const std::string& name);
// Defaults overridden by `overrides`, checked against each ParamSpec (name, range, integral,
// choice); throws InputError (setting "param") naming the bad key or value.
std::map<std::string, double> resolve_policy_params(const std::string& policy,
                                                    const std::map<std::string, double>& overrides);
// Applies a policy's own decoding defaults (e.g. Fast-dLLM threshold 0.9) to `config`; unknown
// policies leave it unchanged. One definition for every front end and the golden-token test.
GenerationConfig apply_own_decoding(GenerationConfig config, const std::string& policy);

}  // namespace cl

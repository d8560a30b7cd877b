// A sweep spec (JSON, docs/sweep-format.md): the models, devices, task items and sampler every
// point shares, and per policy the parameter values to try (a grid, random draws or a Latin
// hypercube). parse_sweep_spec checks everything that can be checked without a model and names
// the offending field; expand_points turns a spec into its points (deterministic for a spec).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"

namespace cl::cli {

enum class SweepSampling { Grid, Random, LatinHypercube };

// One parameter's candidates: explicit values, or a range [min, max] (a grid takes `count`
// evenly spaced values of it; random and Latin-hypercube draws take any value in it).
struct ParamCandidates {
    std::string name;
    std::vector<double> values;  // explicit values; empty for a range
    double min = 0, max = 0;
    int count = 0;  // grid points of a range
    bool integral = false;
};

struct PolicySweep {
    std::string policy;
    SweepSampling sampling = SweepSampling::Grid;
    int points = 0;  // random / Latin hypercube: how many draws
    std::vector<ParamCandidates> params;
};

struct SweepSpec {
    std::string name;
    std::vector<std::string> models;   // folders; "default" is the embedded model
    std::vector<std::string> devices;  // cpu (cuda once the build has it)
    std::vector<std::string> families;
    int items = 10;          // per family
    uint64_t task_seed = 1;  // which items
    uint64_t seed = 0;       // random and Latin-hypercube draws
    SamplerOptions sampler;  // shared by every point (the policies' shared-sampler mode)
    std::vector<PolicySweep> policies;
    std::string canonical;  // the spec as JSON with sorted keys: its identity in results files
};

// A point to measure: its position in the expansion, identity and resolved parameters.
struct SweepPointSpec {
    int32_t index = 0;
    std::string key;
    std::string model, device, policy;
    std::map<std::string, double> params;
};

// Throws InputError naming `file` and the field (e.g. "policies[1].params.gamma").
SweepSpec parse_sweep_spec(const nlohmann::json& j, const std::string& file);
SweepSpec load_sweep_spec(const std::string& file);

// Per model and device: the `none` baseline first, then every policy's points in spec order;
// points that resolve to the same values are measured once.
std::vector<SweepPointSpec> expand_points(const SweepSpec& spec);

}  // namespace cl::cli

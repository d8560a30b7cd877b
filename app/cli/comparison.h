// Running several policies on one prompt with one seed, and the metrics of POLICIES.md section 4
// that compare them with the uncached baseline (agreement, first divergence, FLOP ratio, ...).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"
#include "engine/generation/generator.h"
#include "engine/trace/metrics.h"
#include "engine/trace/trace_store.h"

namespace cl::cli {

struct PolicyRun {
    std::string policy;
    std::map<std::string, double> params;
    GenerationConfig config;
    trace::RunSummary summary;
    std::vector<std::shared_ptr<const trace::StepRecord>> steps;
    int32_t prompt_len = 0;
    int32_t eos_id = -1;
};

// POLICIES.md section 4, one definition for the CLI and the app (engine/trace/metrics.h).
using PolicyMetrics = trace::RunMetrics;

// Runs one policy to the end, collecting its step records into `store` (if given) under run_id.
PolicyRun run_policy(const std::shared_ptr<Model>& model, const std::string& prompt,
                     const GenerationConfig& config, const std::string& policy,
                     const std::map<std::string, double>& params, int32_t run_id = 0,
                     int threads = 1, trace::TraceSink* extra_sink = nullptr);

// "policy" or "policy:key=value+key=value" (the same policy twice with other parameters).
std::pair<std::string, std::map<std::string, double>> parse_column(const std::string& spec);
// The policy name of a column and its parameters: --param values that apply to it, then the
// column's own. Throws InputError for an unknown policy or a malformed column.
std::pair<std::string, std::map<std::string, double>> column_policy_params(
    const std::string& spec, const ParamOptions& options);

// The columns of a --policies list with their parameters (--param values, then the column's own),
// each checked against the registry before anything runs. Errors name --policies.
std::vector<std::pair<std::string, std::map<std::string, double>>> policy_columns(
    const std::vector<std::string>& specs, const ParamOptions& options);

PolicyMetrics compare_with_baseline(const PolicyRun& run, const PolicyRun& baseline);

}  // namespace cl::cli

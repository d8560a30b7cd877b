#include "app/cli/comparison.h"

#include "engine/generation/policy_registry.h"

#include <sstream>

#include "engine/base/errors.h"

namespace cl::cli {

PolicyRun run_policy(const std::shared_ptr<Model>& model, const std::string& prompt,
                     const GenerationConfig& config, const std::string& policy,
                     const std::map<std::string, double>& params, int32_t run_id, int threads,
                     trace::TraceSink* extra_sink) {
    trace::TraceStore store;
    trace::FanOutSink sinks;
    sinks.add(&store);
    sinks.add(extra_sink);
    GenerationRequest req;
    req.prompt_text = prompt;
    req.config = config;
    req.policy = policy;
    req.params = params;
    req.run_id = run_id;
    req.threads = threads;
    Generator gen(model, req, &sinks);
    PolicyRun out;
    out.policy = policy;
    out.params = params;
    out.config = config;
    out.summary = gen.run();
    out.steps = store.steps(run_id);
    out.prompt_len = gen.info().prompt_len;
    out.eos_id = gen.info().eos_id;
    return out;
}

// "policy" or "policy:key=value+key=value" (the same policy twice with other parameters).
std::pair<std::string, std::map<std::string, double>> parse_column(const std::string& spec) {
    const auto colon = spec.find(':');
    if (colon == std::string::npos) return {spec, {}};
    std::map<std::string, double> params;
    std::stringstream ss(spec.substr(colon + 1));
    for (std::string kv; std::getline(ss, kv, '+');) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos)
            throw InputError("--policies: expected key=value in '" + spec + "'");
        try {
            params[kv.substr(0, eq)] = std::stod(kv.substr(eq + 1));
        } catch (const std::exception&) {
            throw InputError("--policies: value of '" + kv.substr(0, eq) +
                             "' is not a number in '" + spec + "'");
        }
    }
    return {spec.substr(0, colon), params};
}

std::pair<std::string, std::map<std::string, double>> column_policy_params(
    const std::string& spec, const ParamOptions& options) {
    const auto [name, column_params] = parse_column(spec);
    // A bare --param key applies to every policy that has it; policy.key to that policy only.
    std::map<std::string, double> params;
    const auto* info = find_policy(name);
    if (!info)
        throw InputError("--policies: unknown policy '" + name +
                         "' (see `cachelens-cli policies`)");
    for (const auto& [k, v] : options.for_policy(name, true))
        for (const auto& p : info->params)
            if (p.name == k) params[k] = v;
    for (const auto& [k, v] : options.for_policy(name, false)) params[k] = v;  // qualified
    for (const auto& [k, v] : column_params) params[k] = v;
    return {name, params};
}

std::vector<std::pair<std::string, std::map<std::string, double>>> policy_columns(
    const std::vector<std::string>& specs, const ParamOptions& options) {
    if (specs.empty()) throw InputError("--policies: no policy given");
    std::vector<std::pair<std::string, std::map<std::string, double>>> out;
    for (const auto& spec : specs) {
        out.push_back(column_policy_params(spec, options));
        try {
            resolve_policy_params(out.back().first, out.back().second);
        } catch (const InputError& e) {
            // The registry names its own setting ("policy: ...", "param: ..."): here the user
            // typed the column into --policies (or --param), so say which column.
            const std::string what = e.what();
            const size_t cut = e.setting().empty() ? 0 : e.setting().size() + 2;
            throw InputError("--policies: " + spec + ": " +
                             what.substr(std::min(cut, what.size())));
        }
    }
    return out;
}

PolicyMetrics compare_with_baseline(const PolicyRun& run, const PolicyRun& base) {
    const trace::RunSteps r{&run.steps, run.prompt_len, run.eos_id};
    const trace::RunSteps b{&base.steps, base.prompt_len, base.eos_id};
    return trace::run_metrics(r, &b);
}

}  // namespace cl::cli

// `cachelens-cli compare --policies a,b,c`: one prompt, one seed, every policy side by side, with
// the baseline `none` run first (added when not listed) so speedup and agreement are measured in
// the same process on the same prompt. `--also-model` repeats the columns on further models (a
// masked and a uniform-noise model side by side), all recorded as one comparison.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/comparison.h"
#include "engine/base/errors.h"
#include "engine/base/json_file.h"
#include "engine/generation/policy_registry.h"
#include "sessions/session_writer.h"

namespace cl::cli {
namespace {

struct CompareOptions {
    ModelOptions model;
    PromptOptions prompt;
    SamplerOptions sampler;
    ParamOptions params;
    AlsoModelOptions also;  // further model folders, same policies and prompt
    std::string policies = "none,dkv-decode,elastic";
    bool own_decoding = false;
    std::string json_file;
    std::string record_file;
    int attention_bits = 4;
    AttentionDetailOptions attention;
    bool oracle = false;
    bool drift = false;
};

std::unique_ptr<sessions::SessionWriter> open_recorder(const CompareOptions& o) {
    if (o.record_file.empty()) return nullptr;
    try {
        sessions::WriterOptions wo;
        wo.want_oracle = o.oracle;
        wo.want_drift = o.drift;
        wo.attention_bits = o.attention_bits;
        wo.attention_budget_bytes = o.attention.budget_bytes();
        wo.full_resolution_layers = o.attention.full_resolution_layers();
        return sessions::SessionWriter::open(o.record_file, wo);
    } catch (const sessions::SessionError& e) {
        throw InputError(e.what());
    }
}

// The policy columns, validated before any model runs, with the baseline `none` first.
std::vector<std::string> column_specs(const CompareOptions& o) {
    auto names = split_list(o.policies);
    policy_columns(names, o.params);  // every column checked before any model runs
    if (std::find(names.begin(), names.end(), "none") == names.end())
        names.insert(names.begin(), "none");
    return names;
}

// One model's runs, each compared with that model's own `none` run (the first column).
struct ModelRuns {
    std::string model_name;
    GenerationConfig config;
    std::vector<PolicyRun> runs;
};

ModelRuns run_model(const ModelOptions& mo, const CompareOptions& o, const std::string& text,
                    const std::vector<std::string>& specs, int32_t& run_id,
                    sessions::SessionWriter* recorder) {
    auto model = mo.load();
    o.attention.check_layers_of(*model);
    ModelRuns out{model->name(), o.sampler.resolve(*model), {}};
    for (const auto& spec : specs) {
        const auto [n, params] = column_policy_params(spec, o.params);
        auto cfg = o.own_decoding ? apply_own_decoding(out.config, n) : out.config;
        out.runs.push_back(run_policy(model, text, cfg, n, params, run_id++, mo.threads, recorder));
    }
    return out;
}

// A column's name in the table: the policy, and its model when several models ran.
std::string run_label(const PolicyRun& r, const ModelRuns& m, bool name_model) {
    return name_model ? r.policy + " @" + m.model_name : r.policy;
}

nlohmann::json print_model_runs(const ModelRuns& m, bool name_model, int label_width) {
    nlohmann::json out = nlohmann::json::array();
    const PolicyRun& base = m.runs.front();
    for (const auto& r : m.runs) {
        const auto x = compare_with_baseline(r, base);
        const std::string label = run_label(r, m, name_model);
        std::printf(
            "%-*s %8d %8.1f %8.2fx %7.2fx %10.2f %9.1f%% %8.1f%% %10s\n", label_width,
            label.c_str(), r.summary.steps, x.tokens_per_s, x.speedup, x.flop_ratio, x.efficiency,
            100 * x.recompute, 100 * x.agreement,
            x.first_divergence < 0 ? "-" : ("step " + std::to_string(x.first_divergence)).c_str());
        out.push_back({{"policy", r.policy},
                       {"model", m.model_name},
                       {"params", r.params},
                       {"steps", r.summary.steps},
                       {"tokens_per_s", x.tokens_per_s},
                       {"speedup", x.speedup},
                       {"flop_ratio", x.flop_ratio},
                       {"efficiency", x.efficiency},
                       {"recompute_fraction", x.recompute},
                       {"agreement", x.agreement},
                       {"first_divergence", x.first_divergence},
                       {"wall_ms", r.summary.wall_ms},
                       {"text", r.summary.final_text}});
    }
    return out;
}

int run_compare(const CompareOptions& o) {
    check_json_writable(o.json_file);  // before the runs that fill it
    const std::string text = o.prompt.text();
    const auto specs = column_specs(o);
    auto recorder = open_recorder(o);
    std::vector<ModelRuns> results;
    int32_t run_id = 0;
    for (const auto& mo : o.also.models(o.model))
        results.push_back(run_model(mo, o, text, specs, run_id, recorder.get()));
    if (recorder && !recorder->flush())
        throw RuntimeFailure("recording failed: " + recorder->error());
    const bool name_model = results.size() > 1;
    int width = 12;
    for (const auto& m : results)
        for (const auto& r : m.runs)
            width = std::max(width, static_cast<int>(run_label(r, m, name_model).size()));
    std::printf("%-*s %8s %8s %9s %8s %10s %10s %9s %10s\n", width, "policy", "steps", "tok/s",
                "speedup", "FLOP-x", "efficiency", "recompute", "agree", "diverges");
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : results)
        for (auto& j : print_model_runs(m, name_model, width)) out.push_back(std::move(j));
    std::printf("\n");
    for (const auto& m : results)
        for (const auto& r : m.runs)
            std::printf("[%s] %s\n", run_label(r, m, name_model).c_str(),
                        r.summary.final_text.c_str());
    if (!o.json_file.empty()) {
        write_json_file(o.json_file, nlohmann::json{{"prompt", text},
                                                    {"sampler", results.front().config.to_map()},
                                                    {"runs", out}});
    }
    return kOk;
}

}  // namespace

void add_compare_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<CompareOptions>();
    auto* cmd = root.add_subcommand(
        "compare", "Run several policies on one prompt with one seed and compare them");
    o->model.add_to(*cmd);
    o->prompt.add_to(*cmd);
    o->sampler.add_to(*cmd);
    o->params.add_to(*cmd);
    cmd->add_option("--policies", o->policies,
                    "Comma-separated policies (none is added as the baseline); "
                    "policy:key=value+key=value sets parameters of one column")
        ->capture_default_str();
    o->also.add_to(*cmd,
                   "run every policy (each model is compared with its own none), e.g. a masked and "
                   "a uniform-noise model side by side");
    cmd->add_flag("--own-decoding", o->own_decoding,
                  "Use each policy's own decoding defaults (e.g. threshold 0.9)");
    cmd->add_option("--json", o->json_file, "Write the comparison as JSON");
    cmd->add_option("--record", o->record_file,
                    "Record every run into a session file (one comparison)");
    add_attention_bits_option(*cmd, o->attention_bits);
    o->attention.add_to(*cmd);
    cmd->add_flag("--oracle", o->oracle,
                  "With --record: record the oracle staleness (a full forward beside each step)");
    cmd->add_flag("--drift", o->drift,
                  "With --record: record the K/V drift probe at every step (the kv-drift panel)");
    cmd->callback([o, &run] { run = [o] { return run_compare(*o); }; });
}

}  // namespace cl::cli

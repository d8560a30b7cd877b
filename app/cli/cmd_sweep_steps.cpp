// `cachelens-cli sweep-steps`: exact-match accuracy against the number of denoising steps, for one
// or more models (a masked and a uniform-noise one): the blog's claim that uniform diffusion
// degrades more gracefully as steps drop. Every model sees the same items, G and B; the result is
// a table, JSON and, with --record, a report in a session that the app's "accuracy vs steps"
// panel draws.
#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/task_scoring.h"
#include "engine/base/errors.h"
#include "engine/base/json_file.h"
#include "engine/base/stats.h"
#include "engine/generation/policy_registry.h"
#include "sessions/reports.h"
#include "sessions/session_writer.h"

namespace cl::cli {
namespace {

struct SweepOptions {
    ModelOptions model;
    AlsoModelOptions also;
    SamplerOptions sampler;
    ParamOptions params;
    std::string policy = "none";
    std::string step_counts = "16,32,64,128";
    std::string tasks = "arith,reverse";
    int items = 20;
    uint64_t task_seed = 1;
    std::string json_file;
    std::string record_file;
};

std::vector<int32_t> parse_step_counts(const std::string& csv) {
    const auto counts =
        whole_numbers(csv, "--step-counts", 1, 65536, "a step count between 1 and 65536");
    std::vector<int32_t> out(counts.begin(), counts.end());
    if (out.empty()) throw InputError("--step-counts: no step count given");
    return out;
}

// The sampler of one step count, checked before any item runs (T must be a multiple of G / B).
GenerationConfig config_for_steps(const SweepOptions& o, const Model& model, int32_t steps) {
    SamplerOptions s = o.sampler;
    s.steps = steps;
    GenerationConfig c = s.resolve(model);
    try {
        c.validate(model.config().max_sequence_length, 0);
    } catch (const InputError& e) {
        if (e.setting() != "steps") throw;  // G or B: the user's own flags, named as usual
        throw InputError("--step-counts" + std::string(e.what()).substr(e.setting().size()));
    }
    return c;
}

void sweep_model(const ModelOptions& mo, const SweepOptions& o, const std::vector<int32_t>& counts,
                 trace::AccuracySweep& sweep) {
    auto model = mo.load();
    const auto params = o.params.for_policy(o.policy);
    resolve_policy_params(o.policy, params);
    std::vector<GenerationConfig> configs;
    configs.reserve(counts.size());
    for (int32_t t : counts) configs.push_back(config_for_steps(o, *model, t));
    sweep.gen_len = static_cast<int32_t>(configs.front().gen_length);
    sweep.block_len = static_cast<int32_t>(configs.front().block_length);
    const auto families = split_list(o.tasks);
    for (size_t k = 0; k < counts.size(); ++k) {
        const ScoringSetup setup{model, configs[k], o.policy, params, mo.threads};
        for (const auto& family : families) {
            const auto score = score_family(setup, family, o.items, o.task_seed);
            trace::AccuracyPoint p;
            p.model = model->name();
            p.noise_process = to_string(model->config().noise_process);
            p.task = family;
            p.steps = counts[k];
            p.items = o.items;
            p.correct = score.correct;
            std::tie(p.low, p.high) = stats::wilson_interval(p.correct, p.items);
            p.tokens_per_s = score.tokens_per_s();
            std::printf("%-28s %-8s %6d %-8s %6d %8.1f%% %6.1f-%5.1f%% %9.1f\n", p.model.c_str(),
                        p.noise_process.c_str(), p.steps, p.task.c_str(), p.items,
                        100 * p.accuracy(), 100 * p.low, 100 * p.high, p.tokens_per_s);
            std::fflush(stdout);
            sweep.points.push_back(p);
        }
    }
}

void record_sweep(const std::string& path, const trace::AccuracySweep& sweep) {
    try {
        auto writer = sessions::SessionWriter::open(path);
        writer->add_report(sweep);
        if (!writer->flush()) throw RuntimeFailure("recording failed: " + writer->error());
    } catch (const sessions::SessionError& e) {
        throw InputError(e.what());
    }
}

int run_sweep_steps(const SweepOptions& o) {
    check_json_writable(o.json_file);  // before the runs that fill it
    check_scored_families(split_list(o.tasks));
    check_item_count(o.items, 100000);
    const auto counts = parse_step_counts(o.step_counts);
    trace::AccuracySweep sweep;
    sweep.policy = o.policy;
    sweep.task_seed = o.task_seed;
    std::printf("%-28s %-8s %6s %-8s %6s %9s %15s %9s\n", "model", "noise", "steps", "task",
                "items", "accuracy", "95% interval", "tok/s");
    for (const auto& mo : o.also.models(o.model)) sweep_model(mo, o, counts, sweep);
    if (!o.json_file.empty()) write_json_file(o.json_file, sessions::to_json(sweep));
    if (!o.record_file.empty()) record_sweep(o.record_file, sweep);
    return kOk;
}

}  // namespace

void add_sweep_steps_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<SweepOptions>();
    auto* cmd = root.add_subcommand(
        "sweep-steps",
        "Exact-match accuracy against the number of denoising steps, for one or more models");
    o->model.add_to(*cmd);
    o->also.add_to(*cmd, "sweep");
    o->sampler.add_to(*cmd);
    o->params.add_to(*cmd);
    cmd->add_option("--policy", o->policy, "Cache policy")->capture_default_str();
    cmd->add_option("--step-counts", o->step_counts,
                    "Comma-separated step counts T (each a multiple of G / B); --steps is ignored")
        ->capture_default_str();
    cmd->add_option("--tasks", o->tasks, "Scored task families")->capture_default_str();
    cmd->add_option("--items", o->items, "Items per family and step count")->capture_default_str();
    cmd->add_option("--task-seed", o->task_seed, "Seed of the eval items")->capture_default_str();
    cmd->add_option("--json", o->json_file, "Write the sweep as JSON");
    cmd->add_option("--record", o->record_file,
                    "Store the sweep as a report in a session file (the app draws it)");
    cmd->callback([o, &run] { run = [o] { return run_sweep_steps(*o); }; });
}

}  // namespace cl::cli

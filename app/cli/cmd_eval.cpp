// `cachelens-cli eval`: exact-match accuracy per task family for a policy, with tokens/s.
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "engine/core/errors.h"
#include "engine/core/generator.h"
#include "engine/tasks/task_suite.h"

namespace cl::cli {
namespace {

struct EvalOptions {
    ModelOptions model;
    SamplerOptions sampler;
    ParamOptions params;
    std::string policies = "none";
    std::string tasks = "arith,kv,reverse";
    int items = 50;
    uint64_t task_seed = 1;
    std::string json_file;
    bool show = false;
};

int run_eval(const EvalOptions& o) {
    auto model = o.model.load();
    const auto families = split_list(o.tasks);
    for (const auto& f : families)
        if (!tasks::is_scored(f) ||
            std::find(tasks::all_families().begin(), tasks::all_families().end(), f) ==
                tasks::all_families().end())
            throw InputError("--tasks: '" + f +
                             "' is not a scored task family (arith, kv, reverse)");
    if (o.items < 1 || o.items > 100000) throw InputError("--items: must be between 1 and 100000");
    const auto policies = split_list(o.policies);
    GenerationConfig cfg = o.sampler.resolve(*model);
    nlohmann::json out = nlohmann::json::array();
    std::printf("%-12s %-8s %6s %9s %9s\n", "policy", "task", "items", "accuracy", "tok/s");
    for (const auto& policy : policies) {
        const auto params = o.params.for_policy(policy, policies.size() == 1);
        for (const auto& family : families) {
            tasks::TaskGenerator gen(o.task_seed, tasks::Split::Eval);
            int correct = 0, tokens = 0;
            double ms = 0;
            for (int i = 0; i < o.items; ++i) {
                auto item = gen.next(family);
                GenerationRequest req;
                req.prompt_text = item.prompt;
                req.config = cfg;
                req.policy = policy;
                req.params = params;
                req.threads = o.model.threads;
                Generator g(model, req);
                auto s = g.run();
                const bool ok = tasks::exact_match(item, s.final_text);
                correct += ok;
                tokens += s.generated_tokens;
                ms += s.wall_ms;
                if (o.show)
                    std::printf("  [%s] %s -> %s (expected %s)\n", ok ? "ok" : "xx",
                                item.prompt.c_str(), s.final_text.c_str(), item.answer.c_str());
            }
            const double acc = static_cast<double>(correct) / o.items;
            const double tps = ms > 0 ? tokens / (ms / 1000.0) : 0;
            std::printf("%-12s %-8s %6d %8.1f%% %9.1f\n", policy.c_str(), family.c_str(), o.items,
                        100 * acc, tps);
            out.push_back({{"policy", policy},
                           {"task", family},
                           {"items", o.items},
                           {"correct", correct},
                           {"accuracy", acc},
                           {"tokens_per_s", tps},
                           {"sampler", cfg.to_map()}});
        }
    }
    if (!o.json_file.empty()) {
        std::ofstream f(o.json_file);
        if (!f) throw InputError(o.json_file, "cannot open for writing");
        f << out.dump(2) << '\n';
    }
    return kOk;
}

}  // namespace

void add_eval_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<EvalOptions>();
    auto* cmd = root.add_subcommand(
        "eval", "Exact-match accuracy on the task suite for one or more policies");
    o->model.add_to(*cmd);
    o->sampler.add_to(*cmd);
    o->params.add_to(*cmd);
    cmd->add_option("--policy,--policies", o->policies, "Policy or comma-separated policies")
        ->capture_default_str();
    cmd->add_option("--tasks", o->tasks, "Comma-separated task families")->capture_default_str();
    cmd->add_option("--items", o->items, "Eval items per family")->capture_default_str();
    cmd->add_option("--task-seed", o->task_seed, "Seed of the eval items")->capture_default_str();
    cmd->add_option("--json", o->json_file, "Write results as JSON");
    cmd->add_flag("--show", o->show, "Print every item with its generation");
    cmd->callback([o, &run] { run = [o] { return run_eval(*o); }; });
}

}  // namespace cl::cli

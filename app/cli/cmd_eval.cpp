#include <cmath>
// `cachelens-cli eval`: exact-match accuracy per task family for a policy, with tokens/s.
#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/comparison.h"
#include "engine/base/errors.h"
#include "engine/base/stats.h"
#include "engine/generation/generator.h"
#include "engine/generation/policy_registry.h"
#include "engine/tasks/task_suite.h"

namespace cl::cli {
namespace {

std::string format_p(double p) {
    char buf[16];
    std::snprintf(buf, sizeof buf, p < 0.001 ? "<0.001" : "%.3f", p);
    return buf;
}

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
    const auto columns = split_list(o.policies);
    std::vector<std::pair<std::string, std::map<std::string, double>>> resolved;
    for (const auto& spec : columns) {  // validate every column before the long run
        resolved.push_back(column_policy_params(spec, o.params));
        resolve_policy_params(resolved.back().first, resolved.back().second);
    }
    GenerationConfig cfg = o.sampler.resolve(*model);
    nlohmann::json out = nlohmann::json::array();
    std::printf("%-24s %-8s %6s %9s %15s %9s %7s %9s\n", "policy", "task", "items", "accuracy",
                "95% interval", "vs none", "p", "tok/s");
    // Per family, which items the baseline got right: "vs none" counts the items where a policy's
    // verdict differs from the baseline's (fixed + broken), a paired view that the accuracies
    // alone hide.
    std::map<std::string, std::vector<bool>> baseline_ok;
    for (size_t c = 0; c < columns.size(); ++c) {
        const auto& [policy, params] = resolved[c];
        for (const auto& family : families) {
            tasks::TaskGenerator gen(o.task_seed, tasks::Split::Eval);
            int correct = 0, tokens = 0, fixed = 0, broken = 0;
            double ms = 0;
            std::vector<bool> ok_items;
            const auto base = baseline_ok.find(family);
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
                ok_items.push_back(ok);
                if (base != baseline_ok.end()) {
                    fixed += ok && !base->second[static_cast<size_t>(i)];
                    broken += !ok && base->second[static_cast<size_t>(i)];
                }
                tokens += s.generated_tokens;
                ms += s.wall_ms;
                if (o.show)
                    std::printf("  [%s] %s -> %s (expected %s)\n", ok ? "ok" : "xx",
                                item.prompt.c_str(), s.final_text.c_str(), item.answer.c_str());
            }
            if (policy == "none" && params.empty()) baseline_ok[family] = ok_items;
            const double acc = static_cast<double>(correct) / o.items;
            const double tps = ms > 0 ? tokens / (ms / 1000.0) : 0;
            // Wilson score interval: honest about how few items an accuracy rests on.
            const auto [low, high] = stats::wilson_interval(correct, o.items);
            const std::string vs = base == baseline_ok.end() ? "-"
                                                             : "+" + std::to_string(fixed) + "/-" +
                                                                   std::to_string(broken);
            // p: exact McNemar test of fixed vs broken (is the paired difference more than noise?).
            const double p = stats::paired_exact_p(fixed, broken);
            const std::string p_text = base == baseline_ok.end() ? "-" : format_p(p);
            std::printf("%-24s %-8s %6d %8.1f%% %6.1f-%5.1f%% %9s %7s %9.1f\n", columns[c].c_str(),
                        family.c_str(), o.items, 100 * acc, 100 * low, 100 * high, vs.c_str(),
                        p_text.c_str(), tps);
            out.push_back({{"policy", columns[c]},
                           {"task", family},
                           {"items", o.items},
                           {"correct", correct},
                           {"accuracy", acc},
                           {"interval95", {low, high}},
                           {"tokens_per_s", tps},
                           {"sampler", cfg.to_map()}});
            if (base != baseline_ok.end()) {
                out.back()["fixed_vs_none"] = fixed;
                out.back()["broken_vs_none"] = broken;
                out.back()["paired_p"] = p;
            }
        }
    }
    if (!o.json_file.empty()) {
        write_json_file(o.json_file, out);
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

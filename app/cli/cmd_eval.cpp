// `cachelens-cli eval`: exact-match accuracy per task family for each policy, with tokens/s, on one
// model or several (`--also-model`: LLaDA and Dream columns in one table).
#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/comparison.h"
#include "app/cli/progress.h"
#include "app/cli/task_scoring.h"
#include "engine/base/errors.h"
#include "engine/base/json_file.h"
#include "engine/generation/policy_registry.h"

namespace cl::cli {
namespace {

struct EvalOptions {
    ModelOptions model;
    SamplerOptions sampler;
    ParamOptions params;
    AlsoModelOptions also;  // further model folders: the same columns on each
    std::string policies = "none";
    std::string tasks = "arith,kv,reverse";
    int items = 50;
    uint64_t task_seed = 1;
    std::string json_file;
    bool show = false;
};

using Column = std::pair<std::string, std::map<std::string, double>>;

// Room for "policy @model" labels when several models share the table.
int label_width(bool name_model) {
    return name_model ? 44 : 24;
}

// One model's rows: every policy column on every family. "vs none" counts the items where a
// policy's verdict differs from that model's baseline (fixed + broken), a paired view that the
// accuracies alone hide.
void eval_model(const ModelOptions& mo, const EvalOptions& o, bool name_model,
                const std::vector<std::string>& columns, const std::vector<Column>& resolved,
                ProgressBar& bar, size_t& done, nlohmann::json& out) {
    auto model = mo.load();
    const auto families = split_list(o.tasks);
    const GenerationConfig cfg = o.sampler.resolve(*model);
    std::map<std::string, std::vector<bool>> baseline_ok;
    for (size_t c = 0; c < columns.size(); ++c) {
        const auto& [policy, params] = resolved[c];
        const ScoringSetup setup{model, cfg, policy, params, mo.threads};
        const std::string label = name_model ? columns[c] + " @" + model->name() : columns[c];
        for (const auto& family : families) {
            const auto s = score_family(setup, family, o.items, o.task_seed, o.show,
                                        [&] { bar.update(++done, label + " " + family); });
            bar.clear();  // the row goes where the bar was
            const auto base = baseline_ok.find(family);
            out.push_back(accuracy_row(label, family, s,
                                       base == baseline_ok.end() ? nullptr : &base->second,
                                       label_width(name_model)));
            out.back()["policy"] = columns[c];
            out.back()["sampler"] = cfg.to_map();
            out.back()["model"] = model->name();
            out.back()["architecture"] = model->config().architecture;
            if (policy == "none" && params.empty()) baseline_ok[family] = s.correct_items;
        }
    }
}

int run_eval(const EvalOptions& o) {
    check_json_writable(o.json_file);  // before the runs that fill it
    const auto families = split_list(o.tasks);
    check_scored_families(families);
    check_item_count(o.items, 100000);
    const auto columns = split_list(o.policies);
    const std::vector<Column> resolved = policy_columns(columns, o.params);  // before the run
    const auto models = o.also.models(o.model);
    nlohmann::json out = nlohmann::json::array();
    print_accuracy_header(label_width(models.size() > 1));
    ProgressBar bar(
        "items", models.size() * columns.size() * families.size() * static_cast<size_t>(o.items));
    size_t done = 0;
    for (const auto& mo : models)
        eval_model(mo, o, models.size() > 1, columns, resolved, bar, done, out);
    if (!o.json_file.empty()) write_json_file(o.json_file, out);
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
    o->also.add_to(*cmd, "evaluate");
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

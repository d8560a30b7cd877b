// `cachelens-cli drift`: the noise-agnostic caching claims measured on a model (either noise
// process): K/V drift by region as a ratio to the active block and against signed distance from a
// changed token (claim 2), and how left-to-right the decode order is (claim 1), over task items
// generated with the drift probe on. Prints a table; --json writes every number.
#include <cmath>
#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/task_scoring.h"
#include "engine/base/errors.h"
#include "engine/base/json_file.h"
#include "engine/generation/generator.h"
#include "engine/generation/policy_registry.h"
#include "engine/tasks/task_suite.h"
#include "engine/trace/drift_analysis.h"
#include "engine/trace/probe.h"

namespace cl::cli {
namespace {

struct DriftOptions {
    ModelOptions model;
    SamplerOptions sampler;
    ParamOptions params;
    std::string policy = "none";
    std::string tasks = "arith,reverse";
    int items = 10;
    uint64_t task_seed = 1;
    int max_distance = 8;
    std::string json_file;
};

// Keeps one run's records with the drift probe on.
class DriftSink final : public trace::TraceSink {
public:
    trace::StepList steps;
    bool wants(const trace::ProbeRequest& r) const override {
        return r.kind == trace::ProbeKind::StepRecord || r.kind == trace::ProbeKind::Drift;
    }
    void on_run_start(const trace::RunInfo&) override { steps.clear(); }
    void publish(std::shared_ptr<const trace::StepRecord> r) override {
        steps.push_back(std::move(r));
    }
    void on_run_end(int32_t, const trace::RunSummary&) override {}
};

void print_regions(const trace::DriftReport& r) {
    const auto ratio = r.ratio_to_active();
    std::printf("%-16s %10s %10s %10s %10s %12s %12s %10s\n", "region", "1-cos K", "relL2 K",
                "1-cos V", "relL2 V", "active/ (K cos)", "active/ (V L2)", "samples");
    for (int g = 0; g < trace::kDriftRegions; ++g) {
        const auto& m = r.by_region[static_cast<size_t>(g)];
        std::printf("%-16s %10.2e %10.2e %10.2e %10.2e %12.1f %12.1f %10lld\n",
                    trace::to_string(static_cast<trace::DriftRegion>(g)), m.k_cos, m.k_rel, m.v_cos,
                    m.v_rel, ratio[static_cast<size_t>(g)][0], ratio[static_cast<size_t>(g)][3],
                    static_cast<long long>(m.n));
    }
}

void print_distance(const trace::DriftReport& r) {
    std::printf(
        "drift against signed distance from the nearest token changed at the step before "
        "(1-cos K / relL2 V):\n");
    for (int d = -r.max_distance; d <= r.max_distance; ++d) {
        const auto& m = r.at_distance(d);
        if (m.n == 0) continue;
        std::printf("  d=%+3d  %9.2e  %9.2e  (%lld)\n", d, m.k_cos, m.v_rel,
                    static_cast<long long>(m.n));
    }
}

nlohmann::json means_json(const trace::DriftMeans& m) {
    return {{"k_one_minus_cos", m.k_cos},
            {"k_rel_l2", m.k_rel},
            {"v_one_minus_cos", m.v_cos},
            {"v_rel_l2", m.v_rel},
            {"samples", m.n}};
}

nlohmann::json report_json(const trace::DriftReport& r, double ltr, int items, int correct) {
    nlohmann::json j;
    const auto ratio = r.ratio_to_active();
    for (int g = 0; g < trace::kDriftRegions; ++g) {
        auto m = means_json(r.by_region[static_cast<size_t>(g)]);
        const auto& q = ratio[static_cast<size_t>(g)];
        auto num = [](double v) {
            return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v);
        };
        m["active_over_region"] = {{"k_one_minus_cos", num(q[0])},
                                   {"k_rel_l2", num(q[1])},
                                   {"v_one_minus_cos", num(q[2])},
                                   {"v_rel_l2", num(q[3])}};
        j["by_region"][trace::to_string(static_cast<trace::DriftRegion>(g))] = m;
    }
    for (int d = -r.max_distance; d <= r.max_distance; ++d) {
        auto m = means_json(r.at_distance(d));
        m["distance"] = d;
        j["by_distance"].push_back(m);
    }
    j["steps"] = r.steps;
    j["left_to_right_spearman"] = std::isnan(ltr) ? nlohmann::json(nullptr) : nlohmann::json(ltr);
    j["items"] = items;
    j["exact_match"] = correct;
    return j;
}

int run_drift(const DriftOptions& o) {
    check_json_writable(o.json_file);  // before the runs that fill it
    auto model = o.model.load();
    const auto families = split_list(o.tasks);
    check_scored_families(families);
    check_item_count(o.items, 10000);
    if (o.max_distance < 1 || o.max_distance > 1024)
        throw InputError("--max-distance: must be between 1 and 1024");
    const auto params = o.params.for_policy(o.policy);
    resolve_policy_params(o.policy, params);
    const ScoringSetup setup{model, o.sampler.resolve(*model), o.policy, params, o.model.threads};
    trace::DriftAccumulator acc(o.max_distance);
    double ltr_sum = 0;
    int ltr_n = 0, correct = 0, total = 0;
    int64_t positions = 0, revised = 0;  // response positions, and those changed more than once
    for (const auto& family : families) {
        tasks::TaskGenerator gen(o.task_seed, tasks::Split::Eval);
        for (int i = 0; i < o.items; ++i) {
            DriftSink sink;
            const auto r = run_task_item(setup, gen.next(family), &sink);
            acc.add_run(r.info, sink.steps);
            const double ltr = trace::left_to_right(trace::last_change_steps(r.info, sink.steps));
            if (!std::isnan(ltr)) {
                ltr_sum += ltr;
                ++ltr_n;
            }
            for (int32_t n : trace::change_counts(r.info, sink.steps)) {
                ++positions;
                revised += n > 1;
            }
            correct += r.correct;
            ++total;
        }
    }
    const auto report = acc.report();
    const double ltr = ltr_n > 0 ? ltr_sum / ltr_n : NAN;
    std::printf("model %s (%s noise), policy %s, %d items, %lld measured steps\n",
                model->name().c_str(), to_string(model->config().noise_process), o.policy.c_str(),
                total, static_cast<long long>(report.steps));
    print_regions(report);
    print_distance(report);
    std::printf(
        "decode order: Spearman(position, step of last change) = %.3f (1 = left to right)\n", ltr);
    std::printf("positions changed more than once: %lld of %lld\n", static_cast<long long>(revised),
                static_cast<long long>(positions));
    std::printf("exact match: %d / %d\n", correct, total);
    if (!o.json_file.empty()) {
        auto j = report_json(report, ltr, total, correct);
        j["positions"] = positions;
        j["positions_revised"] = revised;
        j["model"] = model->name();
        j["noise_process"] = to_string(model->config().noise_process);
        j["policy"] = o.policy;
        j["sampler"] = setup.config.to_map();
        write_json_file(o.json_file, j);
    }
    return kOk;
}

}  // namespace

void add_drift_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<DriftOptions>();
    auto* cmd = root.add_subcommand(
        "drift",
        "K/V drift by region and by distance from changed tokens, and the decode order (the "
        "noise-agnostic caching claims) on task items");
    o->model.add_to(*cmd);
    o->sampler.add_to(*cmd);
    o->params.add_to(*cmd);
    cmd->add_option("--policy", o->policy,
                    "Cache policy (none: every row computed, the true step-to-step drift)")
        ->capture_default_str();
    cmd->add_option("--tasks", o->tasks, "Scored task families")->capture_default_str();
    cmd->add_option("--items", o->items, "Items per family")->capture_default_str();
    cmd->add_option("--task-seed", o->task_seed, "Seed of the eval items")->capture_default_str();
    cmd->add_option("--max-distance", o->max_distance, "Largest |distance| in the profile")
        ->capture_default_str();
    cmd->add_option("--json", o->json_file, "Write every number as JSON");
    cmd->callback([o, &run] { run = [o] { return run_drift(*o); }; });
}

}  // namespace cl::cli

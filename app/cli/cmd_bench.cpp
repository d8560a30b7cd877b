// `cachelens-cli bench`: prompts x policies, warm-up, median of repeats. Two modes:
//   cache-only: the same sampler for every policy (isolates what caching buys);
//   own:        each policy with its own paper decoding (e.g. Fast-dLLM / Elastic threshold 0.9).
// Speedup is measured against `none` on the same prompt in the same process; `--kernels both`
// runs it at the fast and the reference kernels and sets their times side by side. Table + JSON,
// and on the CPU each core's speed around each mode (engine/machine/core_speeds.h) and each round's
// placement of the two CPUs (engine/machine/core_placement.h), by which every policy's paired
// efficiency is split.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/comparison.h"
#include "app/cli/progress.h"
#include "app/cli/task_scoring.h"
#include "engine/base/cpu_clones.h"
#include "engine/base/errors.h"
#include "engine/base/json_file.h"
#include "engine/base/stats.h"
#include "engine/generation/policy_registry.h"
#include "engine/kernels/kernel_choice.h"
#include "engine/machine/core_placement.h"
#include "engine/machine/core_speeds.h"
#include "engine/tasks/task_suite.h"

namespace cl::cli {
namespace {

struct BenchOptions {
    ModelOptions model;
    SamplerOptions sampler;
    ParamOptions params;
    AlsoModelOptions also;  // further model folders: the same bench on each
    std::string policies;   // empty = every registered policy
    int prompts = 3;
    int repeats = 3;
    std::string mode = "both";
    std::string prompt_family = "kv";
    int accuracy_items = 0;  // > 0: exact match of every policy on this many items per family
    std::string accuracy_tasks = "arith,reverse";
    std::string json_file;
};

// Exact match of every (mode, policy) on eval items, each against `none` of the same mode on the
// same items (in "own" mode `none` is the uncached one-token-per-step sampler): what a speedup
// costs, with intervals. `names` starts with "none". A policy without its own decoding runs the
// same sampler in both modes: it is scored once and its row repeated.
nlohmann::json bench_accuracy(const std::shared_ptr<Model>& model, const ModelOptions& mo,
                              const BenchOptions& o, const GenerationConfig& base_cfg,
                              const std::vector<std::string>& names,
                              const std::vector<std::string>& modes) {
    nlohmann::json out = nlohmann::json::array();
    const auto families = split_list(o.accuracy_tasks);
    using Key = std::tuple<std::string, std::string, std::map<std::string, std::string>>;
    std::map<Key, FamilyScore> scored;  // (policy, family, sampler) -> score
    for (const auto& mode : modes) {
        std::printf("\naccuracy, mode %s: %d eval items per family (task seed 1)\n", mode.c_str(),
                    o.accuracy_items);
        print_accuracy_header(12);
        std::map<std::string, std::vector<bool>> baseline;
        for (const auto& n : names) {
            const auto cfg = mode == "own" ? apply_own_decoding(base_cfg, n) : base_cfg;
            const ScoringSetup setup{model, cfg, n, o.params.for_policy(n, names.size() == 1),
                                     mo.threads};
            for (const auto& family : families) {
                const Key key{n, family, cfg.to_map()};
                if (!scored.count(key))
                    scored[key] = score_family(setup, family, o.accuracy_items, 1);
                const FamilyScore& score = scored[key];
                const bool is_base = n == "none";
                out.push_back(
                    accuracy_row(n, family, score, is_base ? nullptr : &baseline[family], 12));
                out.back()["mode"] = mode;
                if (is_base) baseline[family] = score.correct_items;
            }
        }
    }
    return out;
}

// One mode's timed runs on one model: per policy, the metrics of its median repeat against
// `none` on each prompt, and the median repeat's wall time; each round's run against that round's
// `none` run, with the placement probed around the round (every probe in order in round_trips_ns;
// none off the CPU).
struct ModeRuns {
    std::map<std::string, std::vector<PolicyMetrics>> metrics;
    std::map<std::string, std::vector<double>> wall_ms;
    std::map<std::string, std::vector<machine::PairedRound>> paired;
    std::vector<double> round_trips_ns;
};

// Everything a mode's runs share: the model, its sampler, the policies, prompts and progress.
struct BenchContext {
    std::shared_ptr<Model> model;
    const ModelOptions& mo;
    const BenchOptions& o;
    const GenerationConfig& base_cfg;
    const std::vector<std::string>& names;
    const std::vector<std::string>& prompts;
    ProgressBar& bar;
    size_t& runs_done;
    bool on_cpu;  // probe the CPUs' placement
};

// The CPUs' round trip now (engine/machine/core_placement.h), kept in out; -1 off the CPU.
double probe_placement(const BenchContext& b, ModeRuns& out) {
    return b.on_cpu ? machine::probe_round_trip_into(out.round_trips_ns) : -1;
}

// The median of `repeats` runs of every policy on one prompt. Repeats go round-robin over the
// policies, so that a slow moment of the machine lands on every policy alike instead of on one
// policy's repeats. Their step records (no attention maps: nothing asks for them) live until this
// prompt is compared. Each round's runs are also compared with the round's `none` run (b.names
// starts with it), seconds apart: the VM's slow and fast phases last seconds to minutes, and its
// two vCPUs sit on one die or two for as long (engine/machine/core_placement.h), so these pairs,
// split by the farthest placement probed from before the none run to after the policy's, say what
// the medians of runs taken apart cannot.
std::map<std::string, PolicyRun> median_runs(const BenchContext& b, const std::string& mode,
                                             const std::string& prompt, ModeRuns& out) {
    std::map<std::string, std::vector<PolicyRun>> reps;
    for (int r = 0; r < b.o.repeats; ++r) {
        double farthest = probe_placement(b, out);
        for (const auto& n : b.names) {
            auto cfg = mode == "own" ? apply_own_decoding(b.base_cfg, n) : b.base_cfg;
            reps[n].push_back(run_policy(b.model, prompt, cfg, n,
                                         b.o.params.for_policy(n, b.names.size() == 1), 0,
                                         b.mo.threads));
            b.bar.update(++b.runs_done, mode + " " + n);
            farthest = std::max(farthest, probe_placement(b, out));
            if (n != "none")
                out.paired[n].push_back(
                    {compare_with_baseline(reps[n].back(), reps.at("none").back()).efficiency,
                     farthest});
        }
    }
    b.bar.clear();  // the rows go where the bar was
    std::map<std::string, PolicyRun> med;
    for (auto& [n, runs] : reps) {
        std::sort(runs.begin(), runs.end(), [](const PolicyRun& a, const PolicyRun& c) {
            return a.summary.wall_ms < c.summary.wall_ms;
        });
        med[n] = runs[runs.size() / 2];
    }
    return med;
}

ModeRuns time_mode(const BenchContext& b, const std::string& mode,
                   std::vector<int32_t>& prompt_tokens) {
    ModeRuns out;
    for (const auto& prompt : b.prompts) {
        const auto warm = run_policy(b.model, prompt, b.base_cfg, "none", {}, 0, b.mo.threads);
        b.bar.update(++b.runs_done, mode + " warm-up");
        if (prompt_tokens.size() < b.prompts.size()) prompt_tokens.push_back(warm.prompt_len);
        auto med = median_runs(b, mode, prompt, out);
        // In "own" mode the baseline is still the uncached LLaDA sampler (none with no threshold).
        for (const auto& n : b.names) {
            out.metrics[n].push_back(compare_with_baseline(med[n], med["none"]));
            out.wall_ms[n].push_back(med[n].summary.wall_ms);
        }
    }
    return out;
}

// A mode's table: one printed row and one JSON object per policy, means over the prompts.
void mode_rows(const BenchOptions& o, const std::string& mode,
               const std::vector<std::string>& names, const ModeRuns& runs,
               nlohmann::json& results) {
    for (const auto& n : names) {
        const auto& ms = runs.metrics.at(n);
        auto mean = [&](double PolicyMetrics::*f) {
            double s = 0;
            for (const auto& m : ms) s += m.*f;
            return s / static_cast<double>(ms.size());
        };
        const double speedup = mean(&PolicyMetrics::speedup),
                     flop = mean(&PolicyMetrics::flop_ratio);
        const double wall = stats::median(runs.wall_ms.at(n));
        const auto pairs = runs.paired.find(n);  // none's own row has none
        const bool has_pairs = pairs != runs.paired.end() && !pairs->second.empty();
        const machine::Spread paired =
            has_pairs ? machine::spread_of(pairs->second) : machine::Spread{};
        std::printf("%-12s %9.1f %8.2fx %7.2fx %10.2f %9.1f%% %7.1f%% %9.0f", n.c_str(),
                    mean(&PolicyMetrics::tokens_per_s), speedup, flop,
                    mean(&PolicyMetrics::efficiency), 100 * mean(&PolicyMetrics::recompute),
                    100 * mean(&PolicyMetrics::agreement), wall);
        if (has_pairs)
            std::printf(" %7.2f %10s %10s", paired.median,
                        machine::median_over(paired.near_median, paired.near_rounds).c_str(),
                        machine::median_over(paired.far_median, paired.far_rounds).c_str());
        std::printf("\n");
        const nlohmann::json pair_stats = has_pairs ? machine::spread_json(paired) : nullptr;
        results.push_back({{"mode", mode},
                           {"policy", n},
                           {"tokens_per_s", mean(&PolicyMetrics::tokens_per_s)},
                           {"speedup", speedup},
                           {"flop_ratio", flop},
                           {"efficiency", mean(&PolicyMetrics::efficiency)},
                           {"recompute_fraction", mean(&PolicyMetrics::recompute)},
                           {"agreement", mean(&PolicyMetrics::agreement)},
                           {"median_wall_ms", wall},
                           {"paired_efficiency", pair_stats},
                           {"prompts", o.prompts},
                           {"repeats", o.repeats}});
    }
}

// The reference kernels' time beside the fast ones', per mode and policy: both benches' median
// runs, the fast set's first. Their tokens are the same (the golden runs hold it), so a ratio of
// times is a ratio of speeds.
void print_kernel_pairs(const nlohmann::json& fast, const nlohmann::json& reference) {
    std::printf("\nkernels: the median run's ms, fast and reference (same prompts and sampler)\n");
    std::printf("%-12s %-11s %10s %10s %10s\n", "policy", "mode", "fast", "reference", "ref/fast");
    for (const auto& f : fast["results"])
        for (const auto& r : reference["results"]) {
            if (r["mode"] != f["mode"] || r["policy"] != f["policy"]) continue;
            const double a = f["median_wall_ms"].get<double>(),
                         b = r["median_wall_ms"].get<double>();
            std::printf("%-12s %-11s %10.1f %10.1f %9.2fx\n",
                        f["policy"].get<std::string>().c_str(),
                        f["mode"].get<std::string>().c_str(), a, b, a > 0 ? b / a : 0.0);
        }
}

// Every policy on one model, in every mode: the printed tables and the model's JSON object.
nlohmann::json bench_model(const ModelOptions& mo, const BenchOptions& o,
                           const std::vector<std::string>& names,
                           const std::vector<std::string>& modes,
                           const std::vector<std::string>& prompts) {
    auto model = mo.load();
    const GenerationConfig base_cfg = o.sampler.resolve(*model);
    std::printf("\nmodel %s (%s)\n", model->name().c_str(), model->config().architecture.c_str());
    nlohmann::json results = nlohmann::json::array();
    std::vector<int32_t> prompt_tokens;
    ProgressBar bar("runs", modes.size() * prompts.size() *
                                (1 + static_cast<size_t>(o.repeats) * names.size()));
    size_t runs_done = 0;
    // The CPUs' speeds around each mode's runs (engine/machine/core_speeds.h: a 2-thread run waits
    // for the slower core); one probe between two modes, its speeds the first's after and the
    // next's before. None on a GPU, nor placement probes.
    const bool on_cpu = model->device().rfind("cuda", 0) != 0;
    const BenchContext ctx{model, mo, o, base_cfg, names, prompts, bar, runs_done, on_cpu};
    nlohmann::json cores = nlohmann::json::array();
    auto after = on_cpu ? machine::measure_core_speeds() : std::vector<machine::CoreSpeed>{};
    for (const auto& mode : modes) {
        std::printf(
            "\nmode %s: G=%lld B=%lld T=%lld, %d prompts x %d repeats, %d thread(s), LibTorch %s "
            "(BLAS: %s, OpenBLAS kernels: %s), %s kernels (row kernels %s)\n",
            mode.c_str(), (long long)base_cfg.gen_length, (long long)base_cfg.block_length,
            (long long)base_cfg.steps, o.prompts, o.repeats, mo.threads, libtorch_version(),
            blas_threading(), blas_kernels().c_str(), kernel_set_name(kernel_set()),
            cpu::vector_isa());
        std::printf("%-12s %9s %9s %8s %10s %10s %8s %9s %7s %10s %10s\n", "policy", "tok/s",
                    "speedup", "FLOP-x", "efficiency", "recompute", "agree", "ms/run", "paired",
                    "near", "far");
        const ModeRuns runs = time_mode(ctx, mode, prompt_tokens);
        mode_rows(o, mode, names, runs, results);
        if (!on_cpu) continue;
        std::printf("placement: %s\n", machine::describe_round_trips(runs.round_trips_ns).c_str());
        if (const auto busy = machine::busy_warning(runs.round_trips_ns); !busy.empty())
            std::printf("%s\n", busy.c_str());
        const auto before = std::move(after);
        after = machine::measure_core_speeds();
        std::printf("core speed (row-kernel probe on each CPU): %s\n",
                    machine::before_and_after(before, after).c_str());
        cores.push_back({{"mode", mode},
                         {"before", machine::speeds_json(before)},
                         {"after", machine::speeds_json(after)},
                         {"round_trips_ns", runs.round_trips_ns},
                         {"far_round_trip_ns", machine::kFarRoundTripNs}});
    }
    std::printf("\nprompt tokens (chat template included):");
    for (int32_t n : prompt_tokens) std::printf(" %d", n);
    std::printf("\n");
    nlohmann::json accuracy = nlohmann::json::array();
    if (o.accuracy_items > 0) accuracy = bench_accuracy(model, mo, o, base_cfg, names, modes);
    return nlohmann::json{{"model", model->name()},
                          {"architecture", model->config().architecture},
                          {"threads", mo.threads},
                          {"libtorch", libtorch_version()},
                          {"blas_threading", blas_threading()},
                          {"blas_kernels", blas_kernels()},
                          {"row_kernels", cpu::vector_isa()},
                          {"kernels", kernel_set_name(kernel_set())},
                          {"sampler", base_cfg.to_map()},
                          {"prompt_tokens", prompt_tokens},
                          {"core_speeds", cores},
                          {"results", results},
                          {"accuracy", accuracy}};
}

int run_bench(BenchOptions o) {
    check_json_writable(o.json_file);  // before the runs that fill it
    if (o.sampler.gen_length < 0) o.sampler.gen_length = 256;
    if (o.sampler.block_length < 0) o.sampler.block_length = 32;
    if (o.sampler.steps < 0) o.sampler.steps = o.sampler.gen_length;
    std::vector<std::string> names;
    if (o.policies.empty())
        for (const auto& p : list_policies()) names.push_back(p.name);
    else
        names = split_list(o.policies);
    policy_columns(names, {});  // every policy checked before anything runs
    names.erase(std::remove(names.begin(), names.end(), "none"), names.end());
    names.insert(names.begin(), "none");  // the baseline comes first
    if (o.accuracy_items > 0)
        check_scored_families(split_list(o.accuracy_tasks), "--accuracy-tasks");
    if (o.accuracy_items < 0 || o.accuracy_items > 100000)
        throw InputError("--accuracy-items: must be between 0 and 100000");
    std::vector<std::string> modes;
    if (o.mode == "both" || o.mode == "cache-only") modes.emplace_back("cache-only");
    if (o.mode == "both" || o.mode == "own") modes.emplace_back("own");
    if (modes.empty()) throw InputError("--mode: expected cache-only, own or both");
    if (o.prompts < 1 || o.repeats < 1)
        throw InputError("--prompts and --repeats must be positive");
    const auto prompts = tasks::benchmark_prompts(o.prompts, o.prompt_family);
    const auto models = o.also.models(o.model);
    nlohmann::json per_model = nlohmann::json::array();
    for (const auto& mo : models) {
        if (mo.kernels != "both") {
            per_model.push_back(bench_model(mo, o, names, modes, prompts));
            continue;
        }
        nlohmann::json by_set = nlohmann::json::object();
        for (const char* set : {"fast", "reference"}) {
            auto one = mo;
            one.kernels = set;
            by_set[set] = bench_model(one, o, names, modes, prompts);
        }
        print_kernel_pairs(by_set["fast"], by_set["reference"]);
        per_model.push_back(by_set["fast"]);
        per_model.back()["reference_kernels"] = by_set["reference"];
    }
    if (!o.json_file.empty())  // one model's object, or {"models": [...]} for several
        write_json_file(o.json_file,
                        models.size() == 1 ? per_model[0] : nlohmann::json{{"models", per_model}});
    return kOk;
}

}  // namespace

void add_bench_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<BenchOptions>();
    auto* cmd = root.add_subcommand(
        "bench", "Benchmark policies: speedup, FLOP ratio, efficiency, agreement (table + JSON)");
    o->model.add_to(*cmd, /*both_kernel_sets=*/true);
    o->sampler.add_to(*cmd);
    o->params.add_to(*cmd);
    o->also.add_to(*cmd, "bench");
    cmd->add_option("--policies", o->policies,
                    "Comma-separated policies (default: all; none is always the baseline)");
    cmd->add_option("--prompts", o->prompts, "Prompts from the task suite's eval split")
        ->capture_default_str();
    cmd->add_option("--prompt-family", o->prompt_family, "Task family the prompts come from")
        ->capture_default_str();
    cmd->add_option("--repeats", o->repeats,
                    "Timed repeats per (prompt, policy); the median run is kept")
        ->capture_default_str();
    cmd->add_option("--mode", o->mode,
                    "cache-only (same sampler for all), own (each policy's decoding) or both")
        ->capture_default_str();
    cmd->add_option("--accuracy-items", o->accuracy_items,
                    "Also measure exact match on this many eval items per family (0 = off)")
        ->capture_default_str();
    cmd->add_option("--accuracy-tasks", o->accuracy_tasks, "Task families of --accuracy-items")
        ->capture_default_str();
    cmd->add_option("--json", o->json_file, "Write the results as JSON");
    cmd->callback([o, &run] { run = [o] { return run_bench(*o); }; });
}

}  // namespace cl::cli

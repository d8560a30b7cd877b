// bench_steps: where a policy's efficiency (speedup / FLOP ratio, POLICIES.md section 4) goes.
// `cachelens-cli bench` gives one figure per run; this splits each policy's run into its cached
// steps (fewer FLOPs than a full forward) and its full ones, and a cached step's time into its
// layers and the rest of the step (embedding, LM head, sampler, the policy's own reads of the
// attention, per-step set-up), each against `none`'s rate in the same run, at each thread count.
// Every policy on the same sampler (as `cachelens-cli bench --mode cache-only`: one token a step,
// low confidence). Runs go round-robin over the policies (none first) so that the VM's slow phases
// land on all alike; per prompt the median-wall repeat counts, as in the bench. Beside it, each
// round's run against that round's `none` run (eff_pair: the median and range over the rounds),
// which the VM's phases move less, and split by where the host had the two CPUs: a cache line's
// round trip between them before every run (core_placement.h: far over 200 ns, the CPUs on two
// dies); a pair counts as far where any probe from before its none run to after its own run was. At
// 2+ threads, where a policy's cached layers run as one region each (few_rows_layer: q/k/v and
// attention by kv heads; then the policy's verdict, output and MLP by rows), a line of where a
// region's time goes: each thread's work per phase and its wait at the barrier after it
// (phased_region.h's timers, over every run). Prints a table, writes JSON. Not a test: numbers
// only.
//   cachelens-bench-steps [--model DIR] [--policies elastic,d2cache] [--prompts 2] [--repeats 3]
//                         [--threads 1,2] [--json FILE]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "engine/base/cpu_clones.h"
#include "engine/base/json_file.h"
#include "engine/base/stats.h"
#include "engine/generation/generator.h"
#include "engine/generation/policy_registry.h"
#include "engine/kernels/phased_region.h"
#include "engine/machine/core_placement.h"
#include "engine/machine/core_speeds.h"
#include "engine/model/model.h"
#include "engine/tasks/task_suite.h"
#include "engine/trace/metrics.h"
#include "engine/trace/trace_store.h"

namespace {

struct Options {
    std::string model_dir, json_file, policies_csv = "elastic,d2cache,dllm-cache,fast-dual";
    int prompts = 2, repeats = 3;
    int64_t gen_length = 256, block_length = 32, steps = 256;
    std::vector<int> threads{1, 2};
};

// FLOPs and milliseconds summed over a kind of step.
struct StepTotals {
    int64_t steps = 0, layers = 0;
    double wall_ms = 0, layer_ms = 0, flops = 0;

    void add(const cl::trace::StepRecord& s) {
        ++steps;
        wall_ms += s.wall_ms;
        layers += static_cast<int64_t>(s.layer_ms.size());
        for (float ms : s.layer_ms) layer_ms += ms;
        flops += s.flops;
    }
    // The share of the time outside the layers, and its ms a step.
    double outside_layers_share() const { return wall_ms > 0 ? 1.0 - layer_ms / wall_ms : 0.0; }
    double outside_layers_ms() const { return steps > 0 ? (wall_ms - layer_ms) / steps : 0.0; }
    StepTotals& operator+=(const StepTotals& o) {
        steps += o.steps;
        layers += o.layers;
        wall_ms += o.wall_ms;
        layer_ms += o.layer_ms;
        flops += o.flops;
        return *this;
    }
};

// The fused cached layers' regions (phased_region.h) of a policy's runs at one thread count,
// summed over the runs: each share's fork, work and wait per phase, a region's mean in the table;
// and the same runs' quiet steps (RunSplit::quiet), whose layers' mean time, set against the
// region's, is what a cached layer spends outside its region, on the engine thread alone.
struct RegionTimes {
    int64_t runs = 0;
    cl::detail::PhaseTimes sum;
    StepTotals quiet;

    void add(const cl::detail::PhaseTimes& t, const StepTotals& quiet_steps) {
        ++runs;
        sum += t;
        quiet += quiet_steps;
    }
};

// One run split by kind of step: cached (fewer FLOPs than a full forward at that step) or full.
// Efficiencies come from the steps' wall times, as the bench's (trace::run_metrics).
struct RunSplit {
    double wall_ms = 0;  // the run's, to pick the median repeat
    StepTotals cached, full;
    // The cached steps where no trigger fired: no layer of theirs escalated to every row (an
    // escalated layer takes milliseconds, which would swamp the mean of the cached layers).
    StepTotals quiet;
    cl::detail::PhaseTimes regions;  // its fused layers' regions

    StepTotals all() const {
        StepTotals a = cached;
        a += full;
        return a;
    }
};

cl::GenerationConfig sampler_config(const Options& o) {
    cl::GenerationConfig c;
    c.gen_length = o.gen_length;
    c.block_length = o.block_length;
    c.steps = o.steps;
    return c;
}

RunSplit run_once(const std::shared_ptr<cl::Model>& model, const std::string& prompt,
                  const std::string& policy, const Options& o, int threads) {
    cl::GenerationRequest req;
    req.prompt_text = prompt;
    req.config = sampler_config(o);
    req.policy = policy;
    req.threads = threads;
    cl::trace::TraceStore store;  // step records only: nothing asks for attention maps
    cl::Generator gen(model, req, &store);
    RunSplit out;
    cl::detail::reset_phase_times();
    out.wall_ms = gen.run().wall_ms;
    out.regions = cl::detail::phase_times();
    for (const auto& s : store.steps(req.run_id)) {
        const bool cached = s->flops < s->flops_full;
        (cached ? out.cached : out.full).add(*s);
        if (cached && std::none_of(s->triggers.begin(), s->triggers.end(),
                                   [](const cl::trace::TriggerEvent& e) { return e.fired; }))
            out.quiet.add(*s);
    }
    return out;
}

// Per policy, the median-wall repeat of each prompt, summed over the prompts (the bench averages
// each prompt's efficiency instead); and each round's efficiency against the `none` run of the
// same round (prompt and repeat), seconds apart: the VM's slow and fast phases last seconds to
// minutes, so these pairs cancel them where the medians, taken apart, do not.
struct Measured {
    std::map<std::string, RunSplit> medians;
    std::map<std::string, std::vector<cl::machine::PairedRound>>
        paired;                                  // per policy, one per round
    std::map<std::string, RegionTimes> regions;  // per policy, over every run
    std::vector<double> round_trips_ns;          // every probe, in order
};

Measured measure(const std::shared_ptr<cl::Model>& model, const std::vector<std::string>& prompts,
                 const std::vector<std::string>& names, const Options& o, int threads) {
    Measured out;
    for (const auto& prompt : prompts) {
        (void)run_once(model, prompt, "none", o, threads);  // warm-up
        std::map<std::string, std::vector<RunSplit>> reps;
        for (int r = 0; r < o.repeats; ++r) {
            // The farthest probe since the round's none run (names[0]) began; a probe between two
            // runs is the one's after and the other's before.
            double farthest = cl::machine::probe_round_trip_into(out.round_trips_ns);
            for (const auto& n : names) {
                reps[n].push_back(run_once(model, prompt, n, o, threads));
                out.regions[n].add(reps[n].back().regions, reps[n].back().quiet);
                farthest =
                    std::max(farthest, cl::machine::probe_round_trip_into(out.round_trips_ns));
                if (n == "none") continue;
                const StepTotals all = reps.at(n).back().all(), base = reps.at("none").back().all();
                out.paired[n].push_back(
                    {cl::trace::efficiency(all.flops, all.wall_ms, base.flops, base.wall_ms),
                     farthest});
            }
        }
        for (auto& [n, runs] : reps) {
            std::sort(runs.begin(), runs.end(),
                      [](const RunSplit& a, const RunSplit& b) { return a.wall_ms < b.wall_ms; });
            const RunSplit& med = runs[runs.size() / 2];
            out.medians[n].wall_ms += med.wall_ms;
            out.medians[n].cached += med.cached;
            out.medians[n].full += med.full;
        }
    }
    return out;
}

// A policy's row: each kind of step's efficiency against none's (whose steps are all full), the
// layers' against none's layers.
nlohmann::json policy_row(const std::string& n, const RunSplit& p, const RunSplit& none,
                          const cl::machine::Spread& paired, int threads) {
    using cl::trace::efficiency;
    const StepTotals base = none.all(), all = p.all(), &c = p.cached;
    nlohmann::json row = {
        {"threads", threads},
        {"policy", n},
        {"efficiency", efficiency(all.flops, all.wall_ms, base.flops, base.wall_ms)},
        {"cached_steps", c.steps},
        {"full_steps", p.full.steps},
        {"cached_time_share", all.wall_ms > 0 ? c.wall_ms / all.wall_ms : 0.0},
        {"cached_efficiency", efficiency(c.flops, c.wall_ms, base.flops, base.wall_ms)},
        {"cached_layer_efficiency", efficiency(c.flops, c.layer_ms, base.flops, base.layer_ms)},
        {"cached_outside_layers_ms", c.outside_layers_ms()},
        {"cached_outside_layers_share", c.outside_layers_share()},
        {"full_efficiency", efficiency(p.full.flops, p.full.wall_ms, base.flops, base.wall_ms)},
        {"none_outside_layers_share", base.outside_layers_share()},
        {"paired_efficiency", cl::machine::spread_json(paired)}};
    std::printf(
        "%7d %-12s %6.2f %7lld %6lld %8.0f%% %8.2f %8.2f %9.3f %6.0f%% %6.2f %6.2f %4.2f-%4.2f "
        "%9s %9s\n",
        threads, n.c_str(), row["efficiency"].get<double>(), (long long)c.steps,
        (long long)p.full.steps, 100 * row["cached_time_share"].get<double>(),
        row["cached_efficiency"].get<double>(), row["cached_layer_efficiency"].get<double>(),
        c.outside_layers_ms(), 100 * c.outside_layers_share(), row["full_efficiency"].get<double>(),
        paired.median, paired.low, paired.high,
        cl::machine::median_over(paired.near_median, paired.near_rounds).c_str(),
        cl::machine::median_over(paired.far_median, paired.far_rounds).c_str());
    return row;
}

// A policy's fused-layer regions at 2+ threads, us a region: each timed share's time to its first
// phase, each phase's work and the wait at the barrier after it, the join; null where its layers
// ran no such region (d2Cache's and dLLM-Cache's layers, and every layer at 1 thread).
nlohmann::json region_json(const std::string& n, const RegionTimes& r, int threads) {
    const auto& t = r.sum;
    if (t.regions == 0 || r.runs == 0) return nullptr;
    const double per = 1e3 * static_cast<double>(t.regions);  // ns -> us a region
    const int shares = std::min(threads, cl::detail::PhaseTimes::kTimedShares);
    const auto phases =
        static_cast<int>(std::min<int64_t>(t.phases, cl::detail::PhaseTimes::kTimedPhases));
    nlohmann::json fork = nlohmann::json::array(), work = nlohmann::json::array(),
                   wait = nlohmann::json::array();
    for (int s = 0; s < shares; ++s) {
        fork.push_back(static_cast<double>(t.fork_ns[s]) / per);
        nlohmann::json w = nlohmann::json::array(), q = nlohmann::json::array();
        for (int p = 0; p < phases; ++p) {
            w.push_back(static_cast<double>(t.work_ns[s][p]) / per);
            q.push_back(static_cast<double>(t.wait_ns[s][p]) / per);
        }
        work.push_back(w);
        wait.push_back(q);
    }
    return {
        {"threads", threads},
        {"policy", n},
        {"regions_per_run", static_cast<double>(t.regions) / static_cast<double>(r.runs)},
        {"fork_us", fork},
        {"work_us", work},
        {"wait_us", wait},
        {"join_us", static_cast<double>(t.join_ns) / per},
        {"quiet_layer_us",
         r.quiet.layers > 0 ? 1e3 * r.quiet.layer_ms / static_cast<double>(r.quiet.layers) : 0.0}};
}

// region_json's row as one line: each figure share by share (0/1/...).
void print_region(const nlohmann::json& row) {
    const auto& work = row["work_us"];
    const auto& wait = row["wait_us"];
    const size_t shares = work.size(), phases = shares ? work[0].size() : 0;
    std::string line;
    char part[64];
    const auto by_share = [&](const char* label, const auto& us_of_share) {
        line += label;
        for (size_t s = 0; s < shares; ++s) {
            std::snprintf(part, sizeof(part), "%s%.1f", s ? "/" : " ", us_of_share(s));
            line += part;
        }
    };
    by_share("fork", [&](size_t s) { return row["fork_us"][s].get<double>(); });
    for (size_t p = 0; p < phases; ++p) {
        std::snprintf(part, sizeof(part), " | phase %zu", p + 1);
        line += part;
        by_share("", [&](size_t s) { return work[s][p].get<double>(); });
        if (p + 1 < phases) by_share(" wait", [&](size_t s) { return wait[s][p].get<double>(); });
    }
    std::printf(
        "%7d %-12s %.0f regions a run, us a region (share 0/1...): %s | join %.1f; a layer of a "
        "step without a fired trigger %.1f us\n",
        row["threads"].get<int>(), row["policy"].get<std::string>().c_str(),
        row["regions_per_run"].get<double>(), line.c_str(), row["join_us"].get<double>(),
        row["quiet_layer_us"].get<double>());
}

std::vector<std::string> parse_policies(const std::string& csv) {
    std::vector<std::string> names{"none"};
    std::stringstream ss(csv);
    for (std::string x; std::getline(ss, x, ',');) {
        if (x.empty() || x == "none") continue;
        if (cl::find_policy(x) == nullptr)
            throw std::invalid_argument("--policies: unknown policy '" + x + "'");
        names.push_back(x);
    }
    return names;
}

void run(const Options& o) {
    const auto names = parse_policies(o.policies_csv);
    cl::check_json_writable(o.json_file);
    std::filesystem::path dir =
        o.model_dir.empty() ? cl::default_model_dir() : std::filesystem::path(o.model_dir);
    if (dir.empty())
        throw std::runtime_error("--model: no model given and no embedded default model");
    auto model = cl::Model::load(dir, cl::LoadOptions{});
    const auto prompts = cl::tasks::benchmark_prompts(o.prompts, "kv");
    // G, B and T before any run (the prompt's length is checked by each run).
    sampler_config(o).validate(model->config().max_sequence_length, 0);
    cl::choose_blas_kernels();  // the kernels every run below uses, named in the header
    std::printf(
        "model %s, G=%lld B=%lld T=%lld, %d kv prompts x %d repeats (median-wall repeat per "
        "prompt), LibTorch %s (BLAS: %s, OpenBLAS kernels: %s), row kernels %s\n"
        "efficiency = FLOP rate / none's; cached steps: fewer FLOPs than a full forward; "
        "eff_pair: each round against its own none run (median, range); near / far: "
        "eff_pair's median (rounds) where the CPUs stayed near / were far apart "
        "(core_placement.h)\n"
        "%7s %-12s %6s %7s %6s %9s %8s %8s %9s %7s %6s %6s %9s %9s %9s\n",
        model->name().c_str(), (long long)o.gen_length, (long long)o.block_length,
        (long long)o.steps, o.prompts, o.repeats, cl::libtorch_version(), cl::blas_threading(),
        cl::blas_kernels().c_str(), cl::cpu::vector_isa(), "threads", "policy", "eff", "cached",
        "full", "cached_t", "eff_c", "layers_c", "other_ms", "other", "eff_f", "eff_pair", "range",
        "near", "far");
    nlohmann::json rows = nlohmann::json::array(), cores = nlohmann::json::array(),
                   regions = nlohmann::json::array();
    cl::detail::set_phase_timing(true);
    // Each thread count's speeds after it are the next one's before: one probe between two counts.
    auto after = cl::machine::measure_core_speeds();
    for (int t : o.threads) {
        cl::set_thread_count(t);
        const auto before = std::move(after);
        const auto measured = measure(model, prompts, names, o, t);
        after = cl::machine::measure_core_speeds();
        cores.push_back({{"threads", t},
                         {"before", cl::machine::speeds_json(before)},
                         {"after", cl::machine::speeds_json(after)},
                         {"round_trips_ns", measured.round_trips_ns},
                         {"far_round_trip_ns", cl::machine::kFarRoundTripNs}});
        const auto& runs = measured.medians;
        for (const auto& n : names)
            if (n != "none")
                rows.push_back(policy_row(n, runs.at(n), runs.at("none"),
                                          cl::machine::spread_of(measured.paired.at(n)), t));
        const StepTotals base = runs.at("none").all();
        std::printf("%7d %-12s %.0f ms a run, %.3f ms a step outside the layers (%.1f%%)\n", t,
                    "none", runs.at("none").wall_ms / o.prompts, base.outside_layers_ms(),
                    100 * base.outside_layers_share());
        std::printf("%7d %-12s %s\n", t, "core speed",
                    cl::machine::before_and_after(before, after).c_str());
        std::printf("%7d %-12s %s\n", t, "placement",
                    cl::machine::describe_round_trips(measured.round_trips_ns).c_str());
        if (const auto busy = cl::machine::busy_warning(measured.round_trips_ns); !busy.empty())
            std::printf("%7d %s\n", t, busy.c_str());
        for (const auto& n : names)
            if (auto row = region_json(n, measured.regions.at(n), t); !row.is_null()) {
                print_region(row);
                regions.push_back(std::move(row));
            }
    }
    if (o.json_file.empty()) return;
    const nlohmann::json out = {{"model", model->name()},
                                {"gen_length", o.gen_length},
                                {"block_length", o.block_length},
                                {"steps", o.steps},
                                {"prompts", o.prompts},
                                {"repeats", o.repeats},
                                {"row_kernels", cl::cpu::vector_isa()},
                                {"core_speeds", cores},
                                {"rows", rows},
                                {"fused_layer_regions", regions}};
    cl::write_json_file(o.json_file, out);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Each policy's efficiency split into its cached and full steps, layers and rest"};
    Options o;
    app.add_option("--model", o.model_dir, "Model folder (default: the embedded model)");
    app.add_option("--policies", o.policies_csv, "Comma-separated policies (none is the baseline)")
        ->capture_default_str();
    app.add_option("--prompts", o.prompts, "Prompts from the task suite's eval split (kv)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100));
    app.add_option("--repeats", o.repeats,
                   "Timed repeats per (prompt, policy): the median kept; each round paired with "
                   "its none run")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    app.add_option("--gen-length", o.gen_length, "Generated tokens G")->capture_default_str();
    app.add_option("--block-length", o.block_length, "Block length B")->capture_default_str();
    app.add_option("--steps", o.steps, "Denoising steps T")->capture_default_str();
    app.add_option("--threads", o.threads, "CPU thread counts to measure")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    app.add_option("--json", o.json_file, "Write the results as JSON");
    CLI11_PARSE(app, argc, argv);
    try {
        run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cachelens-bench-steps: error: %s\n", e.what());
        return 2;
    }
    return 0;
}

// `cachelens-cli sweep run|status|merge|frontier`: hyperparameter sweeps from a spec file
// (docs/sweep-format.md) into a results file, locally with N worker processes x T threads; the
// Pareto frontier of accuracy against throughput.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/progress.h"
#include "app/cli/sweep_report.h"
#include "app/cli/sweep_runner.h"
#include "app/cli/sweep_slurm.h"
#include "app/cli/sweep_spec.h"
#include "engine/base/errors.h"
#include "engine/base/json_file.h"

extern char** environ;

namespace cl::cli {
namespace {

struct SweepCliOptions {
    std::string spec_file;
    std::string out;
    int workers = 1;
    int threads = 1;
    int shard = 0, of = 1;
    std::string name = "w0";
    std::vector<std::string> files;
    std::string json_file;
    bool all = false;
    std::string executor = "local";
    std::vector<std::string> sbatch_args;
    bool wait = false, no_submit = false;
};

// Runs `fn`, turning results-file errors into input errors (exit code 2).
template <typename Fn>
int with_sweep_errors(Fn fn) {
    try {
        return fn();
    } catch (const sweep::SweepFileError& e) {
        throw InputError(e.what());
    }
}

pid_t spawn_worker(const SweepCliOptions& o, int k) {
    const std::string self = "/proc/self/exe", name = "w" + std::to_string(k);
    const std::string threads = std::to_string(o.threads);
    std::vector<std::string> args = {"cachelens-cli", "sweep",     "worker", o.spec_file, "--out",
                                     o.out,           "--threads", threads,  "--name",    name};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ) != 0)
        throw RuntimeFailure("sweep: cannot start worker " + name);
    return pid;
}

// Starts the workers and draws a progress bar from the results file until they all exit.
int run_local_workers(const SweepCliOptions& o, size_t total, size_t at_start) {
    std::vector<pid_t> pids;
    pids.reserve(static_cast<size_t>(o.workers));
    for (int k = 0; k < o.workers; ++k) pids.push_back(spawn_worker(o, k));
    ProgressBar bar("points", total, stdout);
    auto reader = sweep::SweepStore::open(o.out);
    int failed = 0;
    size_t running = pids.size();
    while (running > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        for (auto& pid : pids) {
            int status = 0;
            if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
                failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                pid = 0;
                --running;
            }
        }
        bar.update(reader->finished_keys().size(), "", at_start);
    }
    bar.finish();
    return failed;
}

int run_sweep(const SweepCliOptions& o) {
    check_json_writable(o.json_file);  // before the runs that fill it
    const auto spec = load_sweep_spec(o.spec_file);
    const auto points = expand_points(spec);
    SweepModels models(o.threads);
    check_sweep_models(spec, models);  // before anything is written
    if (o.executor == "slurm")
        return run_sweep_on_slurm({o.spec_file, o.out, o.workers, o.threads, o.sbatch_args, o.wait,
                                   !o.no_submit, static_cast<int32_t>(points.size())});
    auto store = sweep::SweepStore::create_or_resume(o.out, spec.canonical,
                                                     static_cast<int32_t>(points.size()));
    store->clear_claims();  // no worker of an earlier run is alive
    const size_t at_start = store->finished_keys().size();
    std::printf("sweep %s: %zu points (%zu finished before), %d worker(s) x %d thread(s) -> %s\n",
                spec.name.c_str(), points.size(), at_start, o.workers, o.threads, o.out.c_str());
    if (o.workers == 1) {
        SweepWorkerOptions w{o.threads, 0, 1, "w0", true};
        run_sweep_worker(spec, points, *store, w, models);
    } else if (const int failed = run_local_workers(o, points.size(), at_start)) {
        std::fprintf(stderr, "sweep: %d worker(s) failed; run the same command again to resume\n",
                     failed);
        return kRuntimeFailure;
    }
    print_sweep_status(*store);
    const auto j = print_sweep_frontier(*store);
    if (!o.json_file.empty()) write_json_file(o.json_file, j);
    return kOk;
}

int run_worker(const SweepCliOptions& o) {
    const auto spec = load_sweep_spec(o.spec_file);
    const auto points = expand_points(spec);
    auto store = sweep::SweepStore::create_or_resume(o.out, spec.canonical,
                                                     static_cast<int32_t>(points.size()));
    SweepWorkerOptions w{o.threads, o.shard, o.of, o.name, false};
    SweepModels models(o.threads);
    run_sweep_worker(spec, points, *store, w, models);
    return kOk;
}

void add_run(CLI::App& cmd, Runner& run) {
    auto o = std::make_shared<SweepCliOptions>();
    auto* sub = cmd.add_subcommand("run", "Measure every point of a spec (resumes a killed sweep)");
    sub->add_option("spec", o->spec_file, "Sweep spec (JSON, docs/sweep-format.md)")->required();
    sub->add_option("--out", o->out, "Results file (created, or resumed when it holds this spec)")
        ->required();
    sub->add_option("--workers", o->workers, "Worker processes")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    sub->add_option("--threads", o->threads, "Threads per worker (LibTorch and OpenBLAS)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    sub->add_option("--json", o->json_file, "Write every point's metrics as JSON");
    sub->add_option("--executor", o->executor,
                    "local (worker processes here) or slurm (a job array; --workers array tasks)")
        ->check(CLI::IsMember({"local", "slurm"}))
        ->capture_default_str();
    sub->add_option("--slurm-arg", o->sbatch_args, "Extra sbatch argument (repeatable)");
    sub->add_flag("--wait", o->wait, "slurm: wait for the array to end, then merge into --out");
    sub->add_flag("--no-submit", o->no_submit, "slurm: only write the job script");
    sub->callback(
        [o, &run] { run = [o] { return with_sweep_errors([&] { return run_sweep(*o); }); }; });
}

void add_worker(CLI::App& cmd, Runner& run) {
    auto o = std::make_shared<SweepCliOptions>();
    auto* sub = cmd.add_subcommand("worker", "One worker of a sweep (started by run, or by Slurm)");
    sub->add_option("spec", o->spec_file, "Sweep spec")->required();
    sub->add_option("--out", o->out, "Results file")->required();
    sub->add_option("--threads", o->threads, "Threads")->check(CLI::Range(1, 256));
    sub->add_option("--shard", o->shard, "Measure the points with index % of == shard")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--of", o->of, "Number of shards")->check(CLI::Range(1, 100000));
    sub->add_option("--name", o->name, "Worker name written into claims");
    sub->callback([o, &run] {
        run = [o] {
            if (o->shard >= o->of) throw InputError("--shard: must be less than --of");
            return with_sweep_errors([&] { return run_worker(*o); });
        };
    });
}

// A glob such as RESULTS.shard-* also matches SQLite's -wal, -shm and -journal files beside
// the shards while a sweep runs: they are not results files, so they are left out when their
// database is listed too.
std::vector<std::string> results_files(const std::vector<std::string>& files) {
    std::vector<std::string> out;
    for (const auto& f : files) {
        bool companion = false;
        for (const std::string suffix : {"-wal", "-shm", "-journal"})
            if (f.size() > suffix.size() && f.ends_with(suffix) &&
                std::find(files.begin(), files.end(), f.substr(0, f.size() - suffix.size())) !=
                    files.end())
                companion = true;
        if (!companion) out.push_back(f);
    }
    return out;
}

void add_readers(CLI::App& cmd, Runner& run) {
    auto o = std::make_shared<SweepCliOptions>();
    auto* status = cmd.add_subcommand("status", "Progress of results files (or a sweep's shards)");
    status->add_option("files", o->files, "Results or shard files")->required();
    status->callback([o, &run] {
        run = [o] {
            return with_sweep_errors([&] {
                size_t finished = 0;
                int32_t total = 0;
                const auto files = results_files(o->files);
                for (const auto& f : files) {
                    auto store = sweep::SweepStore::open(f);
                    print_sweep_status(*store);
                    finished += store->finished_keys().size();
                    total = store->info().total_points;  // every shard holds the whole spec's count
                }
                if (files.size() > 1)
                    std::printf("all %zu files: %zu of %d points finished\n", files.size(),
                                finished, total);
                return int{kOk};
            });
        };
    });
    auto f = std::make_shared<SweepCliOptions>();
    auto* frontier = cmd.add_subcommand("frontier", "Pareto-optimal points per policy");
    frontier->add_option("file", f->out, "Results file")->required();
    frontier->add_option("--json", f->json_file, "Write every point with its metrics as JSON");
    frontier->add_flag("--all", f->all, "Print every point, not only the frontier");
    frontier->callback([f, &run] {
        run = [f] {
            return with_sweep_errors([&] {
                const auto j = print_sweep_frontier(*sweep::SweepStore::open(f->out), f->all);
                if (!f->json_file.empty()) write_json_file(f->json_file, j);
                return int{kOk};
            });
        };
    });
    auto m = std::make_shared<SweepCliOptions>();
    auto* merge = cmd.add_subcommand("merge", "Join shard files of one spec into a new file");
    merge->add_option("--out", m->out, "Merged results file (must not exist)")->required();
    merge->add_option("shards", m->files, "Shard files")->required();
    merge->callback([m, &run] {
        run = [m] {
            return with_sweep_errors([&] {
                sweep::merge_sweep_files(results_files(m->files), m->out);
                print_sweep_status(*sweep::SweepStore::open(m->out));
                return int{kOk};
            });
        };
    });
}

}  // namespace

void add_sweep_command(CLI::App& root, Runner& run) {
    auto* cmd = root.add_subcommand(
        "sweep", "Hyperparameter sweeps: accuracy and speed of many settings, and their frontier");
    cmd->require_subcommand(1);
    add_run(*cmd, run);
    add_worker(*cmd, run);
    add_readers(*cmd, run);
}

}  // namespace cl::cli

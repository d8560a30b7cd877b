#include "app/cli/sweep_slurm.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/cli/cli_common.h"
#include "app/cli/progress.h"
#include "app/cli/sweep_report.h"
#include "engine/base/errors.h"
#include "sweep/sweep_store.h"

extern char** environ;

namespace cl::cli {
namespace {

namespace fs = std::filesystem;

// Single-quoted for sh: any path survives.
std::string quoted(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string job_script(const SlurmSweep& s, const std::string& self, const fs::path& dir) {
    const std::string spec = fs::absolute(s.spec_file).string();
    const std::string out = fs::absolute(s.out).string();
    std::string text =
        "#!/bin/bash\n# A CacheLens sweep as a Slurm job array (cachelens-cli sweep run --executor "
        "slurm).\n";
    text += "#SBATCH --job-name=cachelens-sweep\n";
    text += "#SBATCH --array=0-" + std::to_string(s.tasks - 1) + "\n";
    text += "#SBATCH --cpus-per-task=" + std::to_string(s.threads) + "\n";
    text += "#SBATCH --output=" + (dir / "task-%a.log").string() + "\n";
    text += "export OPENBLAS_NUM_THREADS=" + std::to_string(s.threads) + "\n";
    text += "exec " + quoted(self) + " sweep worker " + quoted(spec) + " --out " + quoted(out) +
            ".shard-$SLURM_ARRAY_TASK_ID --shard $SLURM_ARRAY_TASK_ID --of " +
            std::to_string(s.tasks) + " --threads " + std::to_string(s.threads) +
            " --name slurm-$SLURM_ARRAY_TASK_ID\n";
    return text;
}

struct CommandResult {
    bool started = false;  // false: the program was not found or could not run
    int code = -1;
    std::string out;  // stdout + stderr
};

// Runs a program found on PATH with these arguments (no shell), collecting its output.
CommandResult run_program(std::vector<std::string> args) {
    CommandResult r;
    int fds[2];
    if (pipe(fds) != 0) return r;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    r.started = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    std::array<char, 4096> buf;
    ssize_t n = 0;
    while ((n = read(fds[0], buf.data(), buf.size())) > 0)
        r.out.append(buf.data(), static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    if (r.started && waitpid(pid, &status, 0) == pid)
        r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

// Points finished in the shard files that exist so far (a task that has not started has none).
size_t finished_in(const std::vector<std::string>& shards) {
    size_t n = 0;
    for (const auto& f : shards) {
        if (!fs::exists(f)) continue;
        try {
            n += sweep::SweepStore::open(f)->finished_keys().size();
        } catch (const sweep::SweepFileError&) {
            continue;  // being created by its task: counted at the next look
        }
    }
    return n;
}

// Until job `id` has left the queue (squeue lists only pending and running jobs), a progress bar
// from the shard files every 2 s.
void wait_for_array(const std::string& id, const SlurmSweep& s) {
    ProgressBar bar("points", static_cast<size_t>(s.total_points), stdout);
    const auto shards = slurm_shard_files(s.out, s.tasks);
    while (true) {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        bar.update(finished_in(shards));
        const auto q = run_program({"squeue", "-h", "-j", id});
        if (!q.started || q.code != 0 || q.out.find_first_not_of(" \n") == std::string::npos) break;
    }
    bar.update(finished_in(shards));
    bar.finish();
}

}  // namespace

std::vector<std::string> slurm_shard_files(const std::string& out, int tasks) {
    std::vector<std::string> files;
    files.reserve(static_cast<size_t>(std::max(tasks, 0)));
    for (int k = 0; k < tasks; ++k) files.push_back(out + ".shard-" + std::to_string(k));
    return files;
}

int run_sweep_on_slurm(const SlurmSweep& s) {
    if (fs::exists(s.out))
        throw InputError(s.out +
                         ": exists already; a Slurm sweep merges its shards into a new "
                         "file (its shard files resume)");
    const fs::path dir = fs::absolute(s.out + ".slurm");  // task logs land here from any node
    fs::create_directories(dir);
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    const fs::path script = dir / "job.sh";
    std::ofstream(script) << job_script(s, self, dir);
    std::printf("sweep: wrote %s (%d array tasks x %d threads)\n", script.c_str(), s.tasks,
                s.threads);
    std::fflush(stdout);
    if (!s.submit) return kOk;
    std::vector<std::string> cmd = {"sbatch", "--parsable"};
    cmd.insert(cmd.end(), s.sbatch_args.begin(), s.sbatch_args.end());
    cmd.push_back(script.string());
    const auto r = run_program(cmd);
    if (!r.started)
        throw InputError("--executor slurm: cannot run sbatch (is Slurm installed and on PATH?)");
    if (r.code != 0) {
        std::fprintf(stderr, "%s", r.out.c_str());
        std::fprintf(stderr, "sweep: sbatch failed (exit %d); logs in %s\n", r.code, dir.c_str());
        return kRuntimeFailure;
    }
    const std::string id = r.out.substr(0, r.out.find_first_of(";\n"));  // "ID" or "ID;cluster"
    std::printf("sweep: submitted Slurm job array %s\n", id.c_str());
    if (!s.wait) {
        std::printf(
            "sweep: progress: cachelens-cli sweep status %s.shard-*; when done: "
            "cachelens-cli sweep merge --out %s %s.shard-*\n",
            s.out.c_str(), s.out.c_str(), s.out.c_str());
        return kOk;
    }
    std::fflush(stdout);
    wait_for_array(id, s);
    const auto shards = slurm_shard_files(s.out, s.tasks);
    const size_t done = finished_in(shards);
    if (done < static_cast<size_t>(s.total_points)) {
        std::fprintf(stderr,
                     "sweep: the array ended with %zu of %d points finished, not merged; task "
                     "logs in %s; the same command resumes the shards\n",
                     done, s.total_points, dir.c_str());
        return kRuntimeFailure;
    }
    sweep::merge_sweep_files(shards, s.out);
    auto merged = sweep::SweepStore::open(s.out);
    print_sweep_status(*merged);
    print_sweep_frontier(*merged);
    return kOk;
}

}  // namespace cl::cli

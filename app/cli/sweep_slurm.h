// Running a sweep as a Slurm job array: each array task is a `sweep worker` for one shard of the
// points (index % tasks == task id) writing its own results file, <out>.shard-<id>, so no file is
// shared across nodes; `sweep merge` (or --wait, which merges when the array ends) joins them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cl::cli {

struct SlurmSweep {
    std::string spec_file;
    std::string out;                       // the merged results file (must not exist yet)
    int tasks = 1;                         // array tasks = shards
    int threads = 1;                       // per task (--cpus-per-task)
    std::vector<std::string> sbatch_args;  // e.g. --partition=debug
    bool wait = false;                     // block until the array ends, then merge
    bool submit = true;                    // false: only write the job script
    int32_t total_points = 0;              // the spec's points (progress while waiting)
};

std::vector<std::string> slurm_shard_files(const std::string& out, int tasks);

// Writes <out>.slurm/job.sh, submits it with sbatch (and waits and merges with `wait`). Returns
// the exit code for the command. Throws InputError for a bad setup (out exists, no sbatch).
int run_sweep_on_slurm(const SlurmSweep& s);

}  // namespace cl::cli

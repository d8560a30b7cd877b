// Measuring sweep points: a worker claims the next unfinished point of its shard in the results
// file, runs every task item of it (as `eval` runs an item) and writes the point in one
// transaction, until none is left. Several workers may share one file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/cli/sweep_spec.h"
#include "sweep/sweep_store.h"

namespace cl::cli {

struct SweepWorkerOptions {
    int threads = 1;          // LibTorch + OpenBLAS threads of this worker
    int shard = 0, of = 1;    // this worker measures the points with index % of == shard
    std::string name = "w0";  // written into claims
    bool progress = false;    // a line per finished point
};

// The models a process has loaded, by (model, device): each is loaded once, whether by the check
// before a sweep or by the points that use it.
class SweepModels {
public:
    explicit SweepModels(int threads) : m_threads(threads) {}
    std::shared_ptr<Model> get(const std::string& model, const std::string& device);

private:
    int m_threads;
    std::map<std::pair<std::string, std::string>, std::shared_ptr<Model>> m_models;
};

// Loads each model of the spec (on its device) and resolves the sampler against it, so that a
// bad model folder or sampler fails before anything is written. Throws InputError.
void check_sweep_models(const SweepSpec& spec, SweepModels& models);

// Runs this worker's share of `points` that `store` has not finished; returns how many it ran.
int run_sweep_worker(const SweepSpec& spec, const std::vector<SweepPointSpec>& points,
                     sweep::SweepStore& store, const SweepWorkerOptions& o, SweepModels& models);

}  // namespace cl::cli

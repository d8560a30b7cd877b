// What `sweep status`, `sweep frontier` and the end of `sweep run` print: progress, and each
// point's metrics against its baseline with the Pareto-optimal points marked (table + JSON).
#pragma once

#include <nlohmann/json.hpp>

#include "sweep/sweep_store.h"

namespace cl::cli {

// "finished / total" with the points per policy.
void print_sweep_status(const sweep::SweepStore& store);

// Per policy, the frontier of (tokens/s, accuracy) over that policy's points, and the frontier
// over every point; `all` prints every point, not only the frontier ones. Returns the JSON.
nlohmann::json print_sweep_frontier(const sweep::SweepStore& store, bool all = false);

}  // namespace cl::cli

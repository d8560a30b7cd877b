// Work in phases that follow one another across threads, in one parallel region: each thread runs
// its share of a phase, then waits at a barrier until every share of it is done, where a region
// per phase would fork and join LibTorch's threads each time (a cached step's layer: the q/k/v
// pass and attention by kv heads, then the output projection and MLP by rows, which read every
// head's output). The barrier spins, then yields (a machine with more threads than cores).
//
// Only where LibTorch runs its parallel regions on OpenMP, whose team runs every share at once;
// elsewhere (a task pool whose threads may all be busy, where a share waiting for another that
// never starts would wait forever) the phases run on the calling thread, one after another.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace cl::detail {

// A phase's work for the shares [first, last) of `shares` (a thread takes more than one share
// where the region has fewer threads than shares).
using PhaseWork = std::function<void(int64_t first, int64_t last, int64_t shares)>;

// The shares run_in_phases splits its phases into: LibTorch's thread count, or 1 where the phases
// run on the calling thread (inside another parallel region, or no OpenMP).
int64_t phase_shares();

// Runs the phases in order in one region of phase_shares() shares; each phase sees every write of
// the ones before it. Share 0 runs on the calling thread (OpenMP's master), so a phase may call
// LibTorch ops or the caller's hooks there; the other threads have none of the caller's thread-
// local state (grad mode). The first exception a share throws stops every share at the next
// barrier (none starts a later phase) and is rethrown here once the region is over.
void run_in_phases(const std::vector<PhaseWork>& phases);

}  // namespace cl::detail

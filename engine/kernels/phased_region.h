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

#include <array>
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

// Returns once ready() holds: pause instructions for about a millisecond, then yielding the core
// (a machine with more threads than cores). The barrier between run_in_phases' phases waits this
// way, and so may a share that waits for another inside a phase.
void wait_until(const std::function<bool()>& ready);

// Where the regions' time went, for benchmarks (cachelens-bench-steps): summed over the regions of
// 2 or more shares that ran while timing was on, in ns, each share's time from the region's start
// to its first phase (fork), in each phase's work and at the barrier after it (wait; the last
// phase's wait is the join's, taken on the region as a whole). Only the first kTimedShares shares
// and kTimedPhases phases are kept. A cached layer at 2 threads is one such region
// (cachelens-bench-steps prints each phase's share of it).
struct PhaseTimes {
    static constexpr int kTimedShares = 4, kTimedPhases = 4;
    int64_t regions = 0;
    int64_t phases = 0;  // the most phases a timed region had
    std::array<int64_t, kTimedShares> fork_ns{};
    std::array<std::array<int64_t, kTimedPhases>, kTimedShares> work_ns{}, wait_ns{};
    int64_t join_ns = 0;  // from the last share's end to the region's return

    // The sums of both (several runs' times), the most phases of either.
    PhaseTimes& operator+=(const PhaseTimes& o) {
        regions += o.regions;
        phases = phases > o.phases ? phases : o.phases;
        join_ns += o.join_ns;
        for (int s = 0; s < kTimedShares; ++s) {
            fork_ns[s] += o.fork_ns[s];
            for (int p = 0; p < kTimedPhases; ++p) {
                work_ns[s][p] += o.work_ns[s][p];
                wait_ns[s][p] += o.wait_ns[s][p];
            }
        }
        return *this;
    }
};

// Timing off (the default) costs a region one relaxed load of a flag.
void set_phase_timing(bool on);
// The sums since the last reset (a snapshot); reset_phase_times zeroes them.
PhaseTimes phase_times();
void reset_phase_times();

}  // namespace cl::detail

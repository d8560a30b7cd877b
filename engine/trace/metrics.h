// The metrics of POLICIES.md section 4, defined once for every front end (the CLI's compare,
// bench and eval, the app's header metrics and diff strip). Standard library only.
//
// A run is compared with its baseline "up to step t": each side's steps with index <= t (all of
// them when t < 0). On finished runs this is the whole run, so a live column converges to the
// numbers the CLI prints.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/trace/trace_types.h"

namespace cl::trace {

using StepList = std::vector<std::shared_ptr<const StepRecord>>;

// The steps of a run and what the metrics need to know about it.
struct RunSteps {
    const StepList* steps = nullptr;
    int32_t prompt_len = 0;
    int32_t eos_id = -1;
};

struct RunMetrics {
    double wall_ms = 0;       // sum of step wall times
    double flops = 0;         // analytical FLOPs of what was computed
    double flops_full = 0;    // FLOPs of a full forward at every step
    double recompute = 0;     // mean over steps of computed (layer, row) pairs / (N * L)
    int32_t generated = 0;    // decoded response tokens before the first EOS
    double tokens_per_s = 0;  // generated / wall time
    // Against the baseline (NaN / -1 without one; exactly 1 / -1 for the baseline itself):
    double speedup = NAN;     // baseline wall time / run wall time
    double flop_ratio = NAN;  // baseline FLOPs / run FLOPs (the ideal speedup)
    double efficiency = NAN;  // speedup / flop_ratio
    double agreement = NAN;   // share of response positions decoded in both with the same token
    int32_t first_divergence = -1;  // first step committing a token the baseline has otherwise
};

// Efficiency (POLICIES.md section 4): speedup / FLOP ratio, the run's FLOP rate over the
// baseline's, for any part of two runs (their steps up to t here; their cached or full steps in
// cachelens-bench-steps). NaN without time or FLOPs on either side.
double efficiency(double flops, double wall_ms, double base_flops, double base_wall_ms);

// What tokens_per_s means, in the words every front end shows (the header's tooltip, the chart).
inline constexpr const char* kTokensPerSecondDefinition =
    "tokens/s = decoded response tokens before the first EOS / engine wall time of the steps so "
    "far (EOS padding is not counted; the same figure as the CLI and the session list)";

// Metrics of `run` up to step `upto` (< 0: every step), against `baseline` when given.
RunMetrics run_metrics(const RunSteps& run, const RunSteps* baseline, int32_t upto = -1);

// Throughput as the run went: after each step, tokens_per_s of the run up to that step (the
// definition above applied to every prefix) against the engine time spent so far.
struct ThroughputSample {
    double elapsed_s = 0;  // sum of step wall times up to this step
    double tokens_per_s = 0;
    int32_t step = 0;
};
// Appends the samples of the steps `series` does not cover yet (a live run grows by a step at a
// time; each new step costs O(L)).
void extend_throughput_series(const RunSteps& run, std::vector<ThroughputSample>& series);

// The parts, for tests and for callers that need one number.
int32_t generated_tokens(const StepRecord& last, int32_t prompt_len, int32_t eos_id);
double agreement(const StepRecord& run_last, const StepRecord& base_last, int32_t prompt_len);
// The same agreement for two finished runs' final sequences (every position decoded).
double final_agreement(const std::vector<int32_t>& run_final,
                       const std::vector<int32_t>& base_final, int32_t prompt_len);
int32_t first_divergence(const StepList& run, const StepRecord& base_last, int32_t upto = -1);

}  // namespace cl::trace

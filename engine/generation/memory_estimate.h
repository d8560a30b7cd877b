// What a run will hold in memory beyond the loaded weights, estimated before it starts, so that a
// run that cannot fit is refused with the figures instead of being killed by the OOM killer
// (G = 100k on a model whose config allows it would ask for terabytes of attention scores).
// Deliberately generous: an upper estimate of the largest transient plus what grows.
#pragma once

#include <cstdint>
#include <string>

#include "engine/base/process_memory.h"  // available_memory_bytes()
#include "engine/model/model_config.h"

namespace cl {

struct MemoryEstimate {
    double forward_bytes = 0;  // the largest transient of one full forward (scores, activations)
    double cache_bytes = 0;    // every policy's K/V and feature caches at their largest
    double trace_bytes = 0;    // the step records kept for the run (attention maps when traced)
    double total() const { return forward_bytes + cache_bytes + trace_bytes; }
    // "about 12.3 GB (forward 10.0 GB, caches 2.0 GB, trace 0.3 GB)"
    std::string describe() const;
};

// `seq_len`: prompt + generation; `steps`: denoising steps; `attention_trace`: every layer's
// head-mean attention map kept at every step (the app's live columns).
MemoryEstimate estimate_run_memory(const ModelConfig& config, int64_t seq_len, int64_t steps,
                                   bool attention_trace, bool oracle);

// Throws InputError (setting "gen_length") with both figures when `estimate` exceeds 90% of
// `available` (0: unknown, nothing is checked); `device` names a GPU whose free memory that is.
void check_memory_fits(const MemoryEstimate& estimate, double available,
                       const std::string& device = "");

}  // namespace cl

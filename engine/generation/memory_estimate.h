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
    double forward_bytes = 0;     // the largest transient of one full forward (scores, activations)
    double cache_bytes = 0;       // every policy's K/V and feature caches at their largest
    double trace_bytes = 0;       // the step records kept for the run (attention maps when traced)
    double attention_bytes = 0;   // of trace_bytes: the attention maps at their level of detail
    double attention_budget = 0;  // the run's attention budget (0: no maps traced)
    double total() const { return forward_bytes + cache_bytes + trace_bytes; }
    // "about 12.3 GB (forward 10.0 GB, caches 2.0 GB, trace 0.3 GB, of which attention 0.1 GB at
    // a 128 MB budget)"
    std::string describe() const;
};

// `seq_len`: prompt + generation; `steps`: denoising steps; `attention_budget`: the bytes the
// run's head-mean attention maps may take when every layer's map is kept at every step (the app's
// live columns; 0: none kept), `full_resolution_layers` of them never pooled
// (trace/attention_detail.h).
MemoryEstimate estimate_run_memory(const ModelConfig& config, int64_t seq_len, int64_t steps,
                                   double attention_budget, bool oracle,
                                   int64_t full_resolution_layers = 0);

// Throws InputError (setting "gen_length") with both figures when `estimate` exceeds 90% of
// `available` (0: unknown, nothing is checked); `device` names a GPU whose free memory that is.
void check_memory_fits(const MemoryEstimate& estimate, double available,
                       const std::string& device = "");

}  // namespace cl

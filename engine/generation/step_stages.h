// The denoising step as a pipeline of named stages, each a small function in its own file:
//
//   begin     (stage_begin.cpp)   block schedule, planned commits, the policy's step hooks
//   probes    (stage_begin.cpp)   ask the sink what to observe (two-phase probes)
//   predict   (stage_predict.cpp) the forward: the policy's plan through its layer hooks, logits
//                                 of the rows whose predictions are fresh
//   sample    (sampler.cpp)       tokens and confidences from the logits, on their device
//   select    (stage_select.cpp)  which positions to commit (transfer schedule, parallel decoding)
//   drift     (stage_drift.cpp)   observe only, inside predict: each computed row's K/V change
//   oracle    (stage_oracle.cpp)  observe only: a full forward beside the cached one
//   record    (stage_record.cpp)  commit, then build the step's record
//
// Generator::step (generator.cpp) runs them in this order. Internal: includes torch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cuda/event_timeline.h"
#include "engine/generation/generation_config.h"
#include "engine/generation/generator.h"
#include "engine/generation/policy.h"
#include "engine/generation/run_state.h"
#include "engine/generation/sampler.h"
#include "engine/trace/probe.h"
#include "engine/trace/trace_worker.h"

namespace cl::detail {

// The drift probe's memory: each row's last computed K/V per layer.
struct DriftState {
    std::vector<torch::Tensor> k, v;  // (N) of (Hkv, L, Dh); undefined until the first step
    std::vector<uint8_t> have;        // (N, L) 1 = the row was computed before
};

// Which token ids a run has met: a flag per id, as a step asks about every position (a std::set's
// lookups were 0.5% of an Elastic-Cache step, perf).
class SeenIds {
public:
    // Whether id is a token id (>= 0) met here for the first time (then it is marked).
    bool first_sight(int32_t id) {
        if (id < 0) return false;  // no token: a record's -1 where a row was not predicted
        const auto i = static_cast<size_t>(id);
        if (i >= m_seen.size()) m_seen.resize(std::max(i + 1, 2 * m_seen.size()), 0);
        if (m_seen[i]) return false;
        m_seen[i] = 1;
        return true;
    }

private:
    std::vector<uint8_t> m_seen;  // (ids met so far, grown on demand)
};

// Everything a run owns across steps.
struct RunCore {
    std::shared_ptr<const Model> model;
    Transformer* net = nullptr;
    GenerationConfig cfg;
    trace::TraceSink* sink = nullptr;
    std::unique_ptr<CachePolicy> policy;
    trace::RunInfo info;
    RunState state;
    SeenIds seen_ids;  // token ids whose text the records already carry
    // Quantises attention maps beside the engine thread when a core is spare (created on the first
    // step that traces attention); null: quantise inline.
    std::unique_ptr<TraceWorker> trace_worker;
    bool trace_worker_decided = false;
    // The run's attention tile (trace/attention_detail.h): 1 keeps every map at full resolution.
    int32_t attention_tile = 1;
    DriftState drift;
    // On a GPU with this build's kernels: events between the layers (per-layer times as the device
    // ran them); null on the CPU, where the layers' host clocks are their times.
    std::unique_ptr<cuda::EventTimeline> layer_events;

    StepContext context(std::vector<trace::TriggerEvent>* triggers) const;
};

// What the sink asked to observe this step.
struct ProbeWants {
    std::vector<bool> mean;                   // (N) head-mean attention of layer l
    std::vector<std::vector<int32_t>> heads;  // (N) single heads of layer l
    std::vector<bool> full_resolution;        // (N) layer l's maps are never pooled
    bool attention = false;                   // any layer's map is wanted (set once per step)
    bool oracle = false;
    bool drift = false;
};

// One step in flight: what each stage hands to the next.
struct StepWork {
    std::shared_ptr<trace::StepRecord> rec;
    StepContext ctx;
    ProbeWants wants;
    int64_t masked_before = 0;
    // predict
    torch::Tensor ids;                             // (L) int64 on the device
    torch::Tensor logits;                          // (M, V) float32 of the predicted rows
    std::vector<int64_t> predicted_positions;      // (M) positions whose prediction is fresh
    std::vector<std::vector<int64_t>> layer_rows;  // (N) computed rows; empty when all_rows
    std::vector<bool> all_rows;                    // (N)
    std::vector<double> probe_flops;               // (N) of the layer's probe (0 = none)
    std::vector<std::unique_ptr<trace::AttentionMap>> pending_maps;
    // Maps quantised on the device, their levels on the way into pinned host memory (queued on
    // the compute stream, no wait per layer); finish_device_work fills them in.
    struct DeviceMapCopy {
        trace::AttentionMap* map;
        torch::Tensor levels, scale;  // (R, L) uint8, (R) float32, pinned host memory
        cuda::Stream stream;          // the stream the copies were queued on
    };
    std::vector<DeviceMapCopy> device_map_copies;
    std::vector<std::pair<int, int>> layer_marks;  // (N) layer_events marks around each layer
    // sample
    Predictions predictions;
    // select: candidates in commit order, the first `commit_count` are committed
    std::vector<std::pair<double, int64_t>> candidates;
    size_t commit_count = 0;
    std::vector<int32_t> committed;
};

void begin_step(RunCore& run, StepWork& work);
ProbeWants ask_probes(const RunCore& run);
void predict(RunCore& run, StepWork& work);
// After the step's last stage: waits for the copies and events predict queued on a GPU and puts
// their results (attention levels, per-layer times) into the record; nothing on the CPU.
void finish_device_work(RunCore& run, StepWork& work);
void select_commits(RunCore& run, StepWork& work);
// How many of the `ranked` (score, position) masks of the current block the transfer schedule
// commits at this step (before the block's last budgeted step is passed).
size_t scheduled_count(const RunState& s, const GenerationConfig& cfg,
                       const std::vector<std::pair<double, int64_t>>& ranked);
void measure_oracle(RunCore& run, StepWork& work);
// Drift of one layer's computed rows (called by predict's layer observer when wanted).
void observe_drift(RunCore& run, StepWork& work, const LayerResult& layer);
// Per-row cosine and |x - ref| / |ref| of (Hkv, R, Dh) K or V at `positions` (R) into the (N, L)
// arrays of a record: the one definition of both K/V change metrics (oracle and drift).
void compare_rows(const torch::Tensor& x, const torch::Tensor& ref,
                  const std::vector<int64_t>& positions, int64_t layer, int64_t L,
                  std::vector<float>& cos_out, std::vector<float>& rel_out);
void commit_and_record(RunCore& run, StepWork& work);

}  // namespace cl::detail

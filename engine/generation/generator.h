// Generator: one run of the denoising sampler with one cache policy, step by step.
//
// `step()` runs one denoising step and publishes its StepRecord to the sink; `run()` steps to the
// end. Deterministic for a seed: the Gumbel noise and random-remasking draws are seeded per
// (seed, step, position), so runs that differ only by policy see the same noise.
// Torch-free header (pimpl); owns no thread: the caller's thread is the engine thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "engine/generation/generation_config.h"
#include "engine/model/model.h"
#include "engine/trace/probe.h"

namespace cl {

struct GenerationRequest {
    std::string prompt_text;          // as typed (recorded in RunInfo)
    std::vector<int32_t> prompt_ids;  // encoded prompt; empty = encode prompt_text
    bool chat_template = true;        // used only when prompt_ids is empty
    GenerationConfig config;
    std::string policy = "none";
    std::map<std::string, double> params;  // overrides of the policy's defaults
    int32_t run_id = 0;
    int32_t threads = 1;  // recorded; the caller sets the thread count
};

// Attention maps of at least this many probabilities (H x R x L) are quantised on a trace worker
// thread beside the engine when a core is spare (GenerationRequest::threads below the core count);
// smaller ones cost less inline than a thread handoff.
inline constexpr int64_t kTraceWorkerMinFloats = int64_t{1} << 18;

class Generator {
public:
    // Throws InputError for bad requests (unknown policy, bad parameters, sequence too long).
    Generator(std::shared_ptr<const Model> model, const GenerationRequest& request,
              trace::TraceSink* sink = nullptr);
    ~Generator();

    bool done() const;
    // Runs one denoising step; returns its record (also published to the sink).
    std::shared_ptr<const trace::StepRecord> step();
    // Steps until done; `on_step` may return false to abort (the run is then marked aborted).
    trace::RunSummary run(const std::function<bool(const trace::StepRecord&)>& on_step = {});
    // Marks the run aborted (if not finished) and reports the summary to the sink.
    trace::RunSummary finish(bool aborted);

    const trace::RunInfo& info() const;
    const std::vector<int32_t>& tokens() const;  // (L) current sequence
    int32_t steps_done() const;
    std::string response_text(bool skip_special = true) const;
    trace::RunSummary summary() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// Number of tokens to commit at each step of a block with `masked` masked positions and `steps`
// steps: base = masked / steps, the first masked % steps steps get one more (LLaDA).
std::vector<int64_t> transfer_schedule(int64_t masked, int64_t steps);

// Dream's schedule over `steps` steps (timesteps linspace(1, 1e-3, steps + 1) in float32; at step
// i, t = timesteps[i], s = timesteps[i + 1]): the fraction 1 - s / t of the masks each step
// commits (1 at the last step), and the count int(masked * fraction) in Dream's float32
// arithmetic (everything at fraction 1).
std::vector<float> dream_transfer_fractions(int64_t steps);
int64_t dream_transfer_count(int64_t masked, float fraction);

}  // namespace cl

#include "engine/generation/generator.h"

#include "engine/generation/memory_estimate.h"

#include <chrono>

#include "engine/base/errors.h"
#include "engine/cuda/device_query.h"
#include "engine/generation/counter_rng.h"
#include "engine/generation/step_stages.h"
#include "engine/kernels/kernel_choice.h"

namespace cl {

std::vector<int64_t> transfer_schedule(int64_t masked, int64_t steps) {
    std::vector<int64_t> s(static_cast<size_t>(std::max<int64_t>(steps, 0)),
                           steps > 0 ? masked / steps : 0);
    for (int64_t i = 0; i < (steps > 0 ? masked % steps : 0); ++i) s[static_cast<size_t>(i)] += 1;
    return s;
}

std::vector<float> dream_transfer_fractions(int64_t steps) {
    // torch's own linspace, so the float32 timesteps are Dream's to the last bit.
    const auto ts = torch::linspace(1.0, 1e-3, steps + 1, torch::kFloat32).contiguous();
    const float* t = ts.data_ptr<float>();  // (steps + 1)
    std::vector<float> fractions(static_cast<size_t>(std::max<int64_t>(steps, 0)), 1.0F);
    for (int64_t i = 0; i + 1 < steps; ++i)
        fractions[static_cast<size_t>(i)] = 1.0F - t[i + 1] / t[i];
    return fractions;
}

int64_t dream_transfer_count(int64_t masked, float fraction) {
    if (fraction >= 1.0F) return masked;  // the last step: everything left
    return static_cast<int64_t>(static_cast<float>(masked) * fraction);
}

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> encode_prompt(const Model& model, const GenerationRequest& req) {
    std::vector<int32_t> prompt = req.prompt_ids;
    const auto& tok = model.tokenizer();
    if (prompt.empty() && !req.prompt_text.empty()) {
        const bool templ = req.chat_template && model.has_chat_template();
        prompt = tok.encode(templ ? model.apply_chat_template(req.prompt_text) : req.prompt_text);
    }
    for (int32_t id : prompt)
        if (id < 0 || id >= model.config().vocab_size)
            throw InputError("prompt: token id " + std::to_string(id) +
                             " is outside the vocabulary");
    return prompt;
}

void init_state(detail::RunState& s, const Model& model, const GenerationConfig& cfg,
                const std::vector<int32_t>& prompt) {
    s.P = static_cast<int64_t>(prompt.size());
    s.L = s.P + cfg.gen_length;
    s.N = model.config().n_layers;
    s.B = cfg.block_length;
    s.S = cfg.steps_per_block();
    const auto& mc = model.config();
    s.uniform = mc.noise_process == NoiseProcess::Uniform;
    s.x = prompt;
    s.x.resize(static_cast<size_t>(s.L), static_cast<int32_t>(mc.mask_token_id));
    if (s.uniform)  // the response starts as uniform noise, a pure function of the seed
        for (int64_t i = s.P; i < s.L; ++i) {
            const double u = detail::counter_uniform(cfg.seed, -1, i, 0);
            s.x[static_cast<size_t>(i)] = uniform_noise_token(static_cast<uint64_t>(u * 0x1.0p53),
                                                              mc.vocab_size, mc.mask_token_id);
        }
    s.masked.assign(static_cast<size_t>(s.L), 0);
    for (int64_t i = s.P; i < s.L; ++i) s.masked[static_cast<size_t>(i)] = 1;
    s.carried_pred.assign(static_cast<size_t>(s.L), -1);
    s.carried_conf.assign(static_cast<size_t>(s.L), 0.0);
    s.last_compute.assign(static_cast<size_t>(s.N * s.L), -1);
}

trace::RunInfo make_run_info(const detail::RunCore& run, const GenerationRequest& req) {
    const auto& mc = run.model->config();
    const auto& s = run.state;
    trace::RunInfo info;
    info.run_id = req.run_id;
    info.policy = req.policy;
    for (const auto& [k, v] : resolve_policy_params(req.policy, req.params)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        info.policy_params[k] = buf;
    }
    info.sampler = run.cfg.to_map();
    info.model_name = run.model->name();
    info.model_hash = run.model->content_hash();
    info.noise_process = to_string(mc.noise_process);
    info.architecture = mc.architecture;
    info.device = run.model->device();
    info.dtype = run.model->dtype();
    info.kernels = kernel_set_name(kernel_set());
    info.threads = req.threads;
    info.seed = run.cfg.seed;
    info.prompt_text = req.prompt_text;
    info.prompt_len = static_cast<int32_t>(s.P);
    info.gen_len = static_cast<int32_t>(run.cfg.gen_length);
    info.block_len = static_cast<int32_t>(s.B);
    info.steps = static_cast<int32_t>(run.cfg.steps);
    info.n_layers = static_cast<int32_t>(s.N);
    info.n_heads = static_cast<int32_t>(mc.n_heads);
    info.attention_tile = run.attention_tile;
    info.mask_id = static_cast<int32_t>(mc.mask_token_id);
    info.eos_id = static_cast<int32_t>(mc.eos_token_id);
    info.initial_tokens = s.x;
    info.app_version = CL_VERSION;
    return info;
}

// Waits for the step's trace jobs on every exit path, so no job outlives the map it fills.
struct WaitForTraceJobs {
    const std::unique_ptr<detail::TraceWorker>& worker;  // created by the first traced step
    ~WaitForTraceJobs() {
        if (!worker) return;
        try {
            worker->wait();
        } catch (...) {  // NOLINT(bugprone-empty-catch): the step is failing; its exception wins
        }
    }
};

}  // namespace

struct Generator::Impl : detail::RunCore {
    bool ended = false;
    trace::RunSummary summary;
    double recompute_sum = 0;

    std::shared_ptr<const trace::StepRecord> step();
    void advance(trace::StepRecord& rec);
};

namespace {

// The attention budget the sink asks for (0: it traces no attention maps) and how many layers it
// wants at full resolution; a budget that cannot hold this run's maps is refused here.
struct AttentionAsk {
    double budget = 0;
    int64_t full_layers = 0;
    int32_t tile = 1;
};

AttentionAsk ask_attention(const Model& model, const GenerationConfig& cfg,
                           const trace::TraceSink* sink, int64_t seq_len) {
    AttentionAsk a;
    if (!sink || !sink->wants({trace::ProbeKind::Attention, 0, 0, 0, -1})) return a;
    const auto layers = model.config().n_layers;
    a.budget = sink->attention_budget_bytes();
    for (int64_t l = 0; l < layers; ++l)
        a.full_layers +=
            sink->wants({trace::ProbeKind::FullResolution, 0, 0, static_cast<int32_t>(l), -1});
    try {
        a.tile = trace::attention_tile_for_budget(a.budget, layers, seq_len, cfg.steps);
    } catch (const std::invalid_argument& e) {
        throw InputError(Setting{"attention_budget"}, e.what());
    }
    return a;
}

// Refuses a run whose estimate does not fit in the memory left, before anything big is allocated:
// on the CPU all of it; on a GPU the forward and the caches in the device's free memory, the trace
// in the host's. The sink's wish for attention maps decides whether the trace holds them.
void check_fits_in_memory(const Model& model, const GenerationConfig& cfg,
                          const trace::TraceSink* sink, int64_t seq_len,
                          const AttentionAsk& attention) {
    const trace::ProbeRequest oracle{trace::ProbeKind::Oracle, 0, 0, -1, -1};
    const bool with_oracle = sink && sink->wants(oracle);
    const auto estimate = estimate_run_memory(model.config(), seq_len, cfg.steps, attention.budget,
                                              with_oracle, attention.full_layers);
    if (model.device() == "cpu") {
        check_memory_fits(estimate, available_memory_bytes());
        return;
    }
    MemoryEstimate on_device = estimate, on_host;
    on_device.trace_bytes = 0;
    on_host.trace_bytes = estimate.trace_bytes;
    on_host.attention_bytes = estimate.attention_bytes;
    on_host.attention_budget = estimate.attention_budget;
    const auto device = model.net().device();
    check_memory_fits(
        on_device, static_cast<double>(cuda::free_bytes(device.has_index() ? device.index() : 0)),
        model.device());
    check_memory_fits(on_host, available_memory_bytes());
}

}  // namespace

Generator::Generator(std::shared_ptr<const Model> model, const GenerationRequest& req,
                     trace::TraceSink* sink)
    : m_impl(std::make_unique<Impl>()) {
    Impl& m = *m_impl;
    m.model = std::move(model);
    m.net = &m.model->net();
    m.cfg = req.config;
    m.sink = sink;
    const auto prompt = encode_prompt(*m.model, req);
    if (m.cfg.fresh_prefix == GenerationConfig::kSystemTurn)
        m.cfg.fresh_prefix = m.model->system_turn_rows(prompt);
    m.cfg.validate(m.model->config().max_sequence_length, static_cast<int64_t>(prompt.size()));
    const auto seq_len = static_cast<int64_t>(prompt.size()) + m.cfg.gen_length;
    const auto attention = ask_attention(*m.model, m.cfg, m.sink, seq_len);
    check_fits_in_memory(*m.model, m.cfg, m.sink, seq_len, attention);
    m.attention_tile = attention.tile;
    m.policy = create_policy(req.policy, req.params);
    if (m.cfg.cfg_scale > 0 && req.policy != "none")
        throw InputError(
            "classifier-free guidance (cfg_scale > 0) is only supported with the "
            "policy 'none'");
    init_state(m.state, *m.model, m.cfg, prompt);
    m.info = make_run_info(m, req);
    for (int32_t id : m.state.x)
        if (m.seen_ids.first_sight(id)) m.info.token_text[id] = m.model->tokenizer().token_text(id);
    c10::InferenceMode guard;
    m.policy->on_run_start(*m.net, m.state.L);
    if (m.sink) m.sink->on_run_start(m.info);
}

Generator::~Generator() = default;

bool Generator::done() const {
    return m_impl->state.block >= m_impl->cfg.num_blocks();
}
const trace::RunInfo& Generator::info() const {
    return m_impl->info;
}
const std::vector<int32_t>& Generator::tokens() const {
    return m_impl->state.x;
}
int32_t Generator::steps_done() const {
    return m_impl->state.step;
}

std::string Generator::response_text(bool skip_special) const {
    const Impl& m = *m_impl;
    std::vector<int32_t> resp;
    for (int64_t i = m.state.P; i < m.state.L; ++i) {
        const int32_t id = m.state.x[static_cast<size_t>(i)];
        if (id == m.info.eos_id && skip_special) break;
        if (id == m.info.mask_id) continue;
        resp.push_back(id);
    }
    return m.model->tokenizer().decode(resp, skip_special);
}

std::shared_ptr<const trace::StepRecord> Generator::step() {
    if (done()) return nullptr;
    try {
        return m_impl->step();
    } catch (const c10::OutOfMemoryError& e) {
        // LibTorch's message has the sizes (asked, total, free); say which run and step asked. The
        // run's tensors go with the Generator, so the caller (the app's column) can carry on.
        const Impl& m = *m_impl;
        std::string torch_says = e.what_without_backtrace();
        torch_says = torch_says.substr(0, torch_says.find('\n'));
        throw std::runtime_error("out of memory on " + m.model->device() + " at step " +
                                 std::to_string(m.state.step + 1) + " of " + m.info.policy + " (" +
                                 std::to_string(m.state.L) + " tokens): " + torch_says);
    }
}

std::shared_ptr<const trace::StepRecord> Generator::Impl::step() {
    c10::InferenceMode guard;
    const auto t_step = Clock::now();
    detail::StepWork work;
    work.rec = std::make_shared<trace::StepRecord>();
    detail::begin_step(*this, work);
    work.wants = detail::ask_probes(*this);
    const WaitForTraceJobs wait_guard{trace_worker};
    detail::predict(*this, work);
    detail::select_commits(*this, work);
    detail::measure_oracle(*this, work);
    detail::commit_and_record(*this, work);
    policy->on_step_end(work.ctx, work.committed);
    advance(*work.rec);
    if (trace_worker) trace_worker->wait();  // the record is complete before it is published
    detail::finish_device_work(*this, work);
    auto& rec = *work.rec;
    rec.attention.reserve(work.pending_maps.size());
    for (auto& a : work.pending_maps) rec.attention.push_back(std::move(*a));
    rec.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_step).count();
    summary.steps = state.step;
    summary.wall_ms += rec.wall_ms;
    summary.flops += rec.flops;
    summary.flops_full += rec.flops_full;
    recompute_sum += rec.recompute_fraction();
    summary.recompute_fraction = recompute_sum / state.step;
    std::shared_ptr<const trace::StepRecord> out = work.rec;
    if (sink) sink->publish(out);
    return out;
}

// The step and block counters after a step; a block ends when it has no masks left (and, without
// parallel decoding, its steps are used up).
void Generator::Impl::advance(trace::StepRecord& rec) {
    auto& s = state;
    s.last_committed = rec.committed;
    ++s.step;
    ++s.step_in_block;
    const bool block_done =
        s.uniform ? s.block_settled || s.step_in_block >= s.S
                  : !s.block_has_masks() && (cfg.parallel_decoding() || s.step_in_block >= s.S);
    if (block_done) {
        if (s.uniform)  // the block's tokens are final: it is context from now on
            for (int64_t i = s.block_start(); i < s.block_end(); ++i)
                s.masked[static_cast<size_t>(i)] = 0;
        policy->on_block_end(context(&rec.triggers));
        ++s.block;
        s.step_in_block = 0;
    } else if (s.step_in_block >= s.S + s.B + 1) {
        throw RuntimeFailure("policy '" + info.policy + "' made no progress in block " +
                             std::to_string(s.block));
    }
}

trace::RunSummary Generator::summary() const {
    const Impl& m = *m_impl;
    trace::RunSummary s = m.summary;
    s.final_tokens = m.state.x;
    int32_t gen = 0;
    for (int64_t i = m.state.P; i < m.state.L; ++i) {
        const int32_t id = m.state.x[static_cast<size_t>(i)];
        if (id == m.info.eos_id || id == m.info.mask_id) break;
        ++gen;
    }
    s.generated_tokens = gen;
    s.tokens_per_s = s.wall_ms > 0 ? gen / (s.wall_ms / 1000.0) : 0.0;
    s.final_text = sanitize_utf8(response_text(true));  // a byte-level model may stop mid-character
    s.status = done() ? trace::RunStatus::Complete : trace::RunStatus::Running;
    return s;
}

trace::RunSummary Generator::finish(bool aborted) {
    trace::RunSummary s = summary();
    if (aborted || !done()) s.status = trace::RunStatus::Aborted;
    if (!m_impl->ended) {
        m_impl->ended = true;
        if (m_impl->sink) m_impl->sink->on_run_end(m_impl->info.run_id, s);
    }
    return s;
}

trace::RunSummary Generator::run(const std::function<bool(const trace::StepRecord&)>& on_step) {
    while (!done()) {
        auto rec = step();
        if (on_step && !on_step(*rec)) return finish(true);
    }
    return finish(false);
}

}  // namespace cl

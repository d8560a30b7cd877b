// Stage "predict": the forward of one step. The policy's plan runs through its layer hooks; the
// layers' computed rows are recorded on the host (no device round trip) and the attention maps the
// sink asked for are captured (an observing stage: on the CPU it quantises the probabilities, on a
// GPU it queues their quantised levels into pinned host memory, and events time each layer, both
// read by finish_device_work after the step). Then the LM head over the rows whose predictions are
// fresh: row r predicts position r + logits_shift.
#include <thread>

#include "engine/cuda/attention_quant.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_query.h"
#include "engine/generation/attention_pooling.h"
#include "engine/generation/device_stream.h"
#include "engine/generation/step_stages.h"

namespace cl::detail {
namespace {

// The rows a step computes besides the policy's: the fresh prefix [0, n) (GenerationConfig::
// fresh_prefix) and, for an architecture with shifted logits, the row that predicts each row's
// token (r - shift): the policy's rows name the positions whose predictions it wants fresh.
RowSet with_engine_rows(const RowSet& rows, int shift, int64_t fresh_prefix, torch::Device device) {
    std::vector<int64_t> out;
    out.reserve(rows.host.size() * 2 + static_cast<size_t>(fresh_prefix));
    for (int64_t r = 0; r < fresh_prefix; ++r) out.push_back(r);
    for (int64_t r : rows.host) {
        if (shift != 0 && r - shift >= 0) out.push_back(r - shift);
        out.push_back(r);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return RowSet::from_host(std::move(out), device);
}

// On a CUDA device with this build's kernels: the head mean and its 8-bit levels are computed
// there (engine/cuda/attention_quant.h, exact against AttentionMap::set_head_mean), and (R, L)
// bytes are queued to pinned host memory instead of (H, R, L) floats crossing with a wait per
// layer; finish_device_work fills `out` after the step. False where that cannot be done.
bool quantize_on_device(const torch::Tensor& maps, trace::AttentionMap& out,
                        StepWork& work) {  // maps (H', R, L)
    if (!runs_on_kernels(maps)) return false;
    auto probs = maps.to(torch::kFloat32).contiguous();  // (H', R, L) on the device
    const auto H = probs.size(0), R = probs.size(1), L = probs.size(2);
    auto levels = torch::empty({R, L}, probs.options().dtype(torch::kUInt8));  // (R, L)
    auto scale = torch::empty({R}, probs.options());                           // (R)
    const auto stream = current_stream(probs);
    cuda::head_mean_quantize(probs.data_ptr<float>(), static_cast<int32_t>(H),
                             static_cast<int32_t>(R), static_cast<int32_t>(L),
                             levels.data_ptr<uint8_t>(), scale.data_ptr<float>(), stream);
    const auto pinned = torch::TensorOptions().pinned_memory(true);
    StepWork::DeviceMapCopy copy{&out, torch::empty({R, L}, pinned.dtype(torch::kUInt8)),
                                 torch::empty({R}, pinned.dtype(torch::kFloat32)), stream};
    copy.levels.copy_(levels, /*non_blocking=*/true);
    copy.scale.copy_(scale, /*non_blocking=*/true);
    work.device_map_copies.push_back(std::move(copy));
    return true;
}

// The attention maps of one layer, quantised to the record's 8-bit levels on the trace worker
// (or inline for small maps, which cost less than a thread handoff), pooled into tiles where the
// run's attention budget asks for them (trace/attention_detail.h): on a GPU the pooling runs there,
// before anything is copied.
void capture_attention(RunCore& run, StepWork& work, const LayerResult& r) {
    const auto l = static_cast<size_t>(r.layer);
    std::vector<int32_t> row_index;
    if (r.rows)
        row_index.assign(r.rows->host.begin(), r.rows->host.end());
    else
        for (int64_t i = 0; i < run.state.L; ++i) row_index.push_back(static_cast<int32_t>(i));
    const auto detail =
        trace::attention_detail_for(run.attention_tile, static_cast<int64_t>(row_index.size()),
                                    run.state.L, work.wants.full_resolution[l]);
    auto store = [&](const torch::Tensor& maps, int32_t head) {  // (H', R, L)
        auto a = std::make_unique<trace::AttentionMap>();
        a->layer = r.layer;
        a->head = head;
        a->rows = static_cast<int32_t>(maps.size(1));
        a->cols = static_cast<int32_t>(maps.size(2));
        a->keys = a->cols;
        a->key_tile = detail.key_tile;
        a->row_tile = detail.row_tile;
        a->row_index = row_index;
        // Off the CPU the tiles are pooled where the maps are, and the pooled (1, R', C') map is
        // then quantised as any map of one head; on the CPU the trace's own loop pools them.
        torch::Tensor source = maps;  // (H', R, L) or, pooled, (1, R', C')
        const bool pool_on_host = !detail.full_resolution() && maps.device().is_cpu();
        if (!detail.full_resolution() && !pool_on_host) {
            source = pool_attention(maps, row_index, detail, a->row_index).unsqueeze(0);
            a->rows = static_cast<int32_t>(source.size(1));
            a->cols = static_cast<int32_t>(source.size(2));
        }
        if (!pool_on_host && quantize_on_device(source, *a, work)) {
            work.pending_maps.push_back(std::move(a));
            return;
        }
        auto cpu = source.to(torch::kCPU, torch::kFloat32).contiguous();
        // The job keeps the probabilities alive; nothing writes to them after the layer.
        auto job = [map = a.get(), cpu, pool_on_host, positions = row_index] {
            const auto heads = static_cast<int32_t>(cpu.size(0));
            if (pool_on_host)
                map->set_pooled_head_mean(cpu.data_ptr<float>(), heads, positions);
            else
                map->set_head_mean(cpu.data_ptr<float>(), heads);
        };
        work.pending_maps.push_back(std::move(a));
        if (run.trace_worker && cpu.numel() >= kTraceWorkerMinFloats)
            run.trace_worker->submit(std::move(job));
        else
            job();
    };
    // The head mean where the attention made it (the mean of one "head" is itself), else the
    // probabilities' mean.
    if (work.wants.mean[l]) store(r.head_mean.defined() ? r.head_mean.unsqueeze(0) : r.probs, -1);
    for (int32_t h : work.wants.heads[l])
        if (r.probs.defined()) store(r.probs.narrow(0, h, 1), h);
}

// The policy's per-layer hooks as the plan forward sees them, plus the step's observers.
class StepHooks final : public LayerHooks {
public:
    StepHooks(RunCore& run, StepWork& work)
        : m_run(run),
          m_work(work),
          m_shift(run.model->config().logits_shift),
          m_fresh_prefix(run.cfg.fresh_prefix),
          m_stream(current_stream(run.net->device())) {}
    LayerPlan plan(int layer) override {
        const auto l = static_cast<size_t>(layer);
        if (m_run.layer_events) m_work.layer_marks[l].first = m_run.layer_events->mark(m_stream);
        auto p = m_run.policy->plan_layer(layer);
        if (m_work.wants.mean[l] && m_work.wants.heads[l].empty()) {
            // The head mean alone: the CPU attention sums it in its own pass, without writing
            // the (H, R, L) probabilities (with many narrow heads, writing and reading them was a
            // third of a full step: cachelens-bench-scale); the policy still gets what it reads
            // of the probabilities (only the rows it asked for).
            p.want_head_mean = true;
        } else if (m_work.wants.mean[l] || !m_work.wants.heads[l].empty()) {
            p.want_probs = true;  // the attention panel shows every computed row
            p.want_probs_mean = false;
            p.probs_positions.clear();
        }
        if (!p.all_rows) p.rows = add_engine_rows(p.rows);
        if (p.probe)
            m_work.probe_flops[l] =
                probe_flops(m_run.model->config(), p.probe_rows.size(), p.probe_k);
        return p;
    }
    RowSet select_rows(int layer, const torch::Tensor& k, const torch::Tensor& v) override {
        return add_engine_rows(m_run.policy->select_rows(layer, k, v));
    }
    bool escalate(const LayerResult& attention) override {
        return m_run.policy->escalate(attention);
    }
    void observe(const LayerResult& r) override {
        const auto l = static_cast<size_t>(r.layer);
        if (m_run.layer_events) m_work.layer_marks[l].second = m_run.layer_events->mark(m_stream);
        m_run.policy->observe_layer(r);
        m_work.rec->layer_ms[l] = static_cast<float>(r.ms);  // on a GPU: the events' instead
        m_work.all_rows[l] = r.rows == nullptr;
        if (r.rows) m_work.layer_rows[l] = r.rows->host;
        if ((r.probs.defined() || r.head_mean.defined()) && m_work.wants.attention)
            capture_attention(m_run, m_work, r);
        if (m_work.wants.drift) observe_drift(m_run, m_work, r);
    }

private:
    // A policy usually plans the same rows at every layer of a step (RowSetPolicy): the union is
    // built once per step and reused while the policy's rows stay the same.
    RowSet add_engine_rows(const RowSet& rows) {
        if (m_shift == 0 && m_fresh_prefix == 0) return rows;
        if (m_engine_rows.device.defined() && rows.host == m_policy_rows) return m_engine_rows;
        m_policy_rows = rows.host;
        m_engine_rows = with_engine_rows(rows, m_shift, m_fresh_prefix, m_run.net->device());
        return m_engine_rows;
    }

    RunCore& m_run;
    StepWork& m_work;
    int m_shift;
    int64_t m_fresh_prefix;
    cuda::Stream m_stream;               // the compute stream on a GPU (layer_events marks it)
    std::vector<int64_t> m_policy_rows;  // the rows m_engine_rows was built from
    RowSet m_engine_rows;
};

// The trace worker exists only with a core to spare beside the engine's threads: otherwise it
// would compete with the matrix products it is meant to stay out of the way of.
void decide_trace_worker(RunCore& run, const ProbeWants& wants) {
    if (!wants.attention || run.trace_worker_decided) return;
    run.trace_worker_decided = true;
    if (std::thread::hardware_concurrency() > static_cast<unsigned>(std::max(run.info.threads, 1)))
        run.trace_worker = std::make_unique<TraceWorker>();
}

// Classifier-free guidance: a batch of (conditional, prompt-masked) through the full forward.
void predict_guided(RunCore& run, StepWork& work) {
    const RunState& s = run.state;
    auto un = work.ids.clone();
    un.narrow(0, 0, s.P).fill_(run.model->config().mask_token_id);
    auto both = run.net->forward_full(torch::stack({work.ids, un}));  // (2, L, V)
    auto c = both[0], u = both[1];
    auto guided = u + (run.cfg.cfg_scale + 1.0) * (c - u);  // (L, V)
    const int shift = run.model->config().logits_shift;
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < s.L; ++i)
        if (s.masked[static_cast<size_t>(i)] && i - shift >= 0) {
            work.predicted_positions.push_back(i);
            rows.push_back(i - shift);
        }
    work.logits = guided.index_select(0, RowSet::from_host(rows, run.net->device()).device);
}

// The head over the last layer's rows that predict a masked position.
void predict_planned(RunCore& run, StepWork& work) {
    const RunState& s = run.state;
    StepHooks hooks(run, work);
    RowSet out_rows;
    auto hidden = run.net->forward_plan(work.ids, hooks, run.policy->cache(), out_rows);  // (R, D)
    const int shift = run.model->config().logits_shift;
    std::vector<int64_t> local;  // rows of `hidden`
    for (size_t i = 0; i < out_rows.host.size(); ++i) {
        const int64_t pos = out_rows.host[i] + shift;
        if (pos < s.L && s.masked[static_cast<size_t>(pos)]) {
            local.push_back(static_cast<int64_t>(i));
            work.predicted_positions.push_back(pos);
        }
    }
    if (!local.empty()) work.logits = run.net->head(rows_of(hidden, local));
}

// On a GPU with this build's kernels, the step's layers are timed by events (created once a run).
void start_layer_events(RunCore& run, StepWork& work) {
    const auto device = run.net->device();
    if (!device.is_cuda() || !cuda::kernels_built()) return;
    if (!run.layer_events)
        run.layer_events =
            std::make_unique<cuda::EventTimeline>(device.has_index() ? device.index() : 0);
    run.layer_events->clear();
    work.layer_marks.assign(static_cast<size_t>(run.state.N), {-1, -1});
}

}  // namespace

void predict(RunCore& run, StepWork& work) {
    const RunState& s = run.state;
    const auto N = static_cast<size_t>(s.N);
    decide_trace_worker(run, work.wants);
    work.ids = longs_on(s.x, run.net->device());  // (L)
    work.layer_rows.assign(N, {});
    work.all_rows.assign(N, true);
    work.probe_flops.assign(N, 0.0);
    work.rec->layer_ms.assign(N, 0.f);
    start_layer_events(run, work);
    if (run.cfg.cfg_scale > 0)
        predict_guided(run, work);
    else
        predict_planned(run, work);
    if (work.predicted_positions.empty()) return;
    SamplerInputs in;
    in.cfg = &run.cfg;
    in.step = s.step;
    in.eos_id = run.info.eos_id;
    in.eot_id = run.model->eot_id();
    in.top_k = trace::StepRecord::kTopK;
    std::vector<int32_t> current;
    if (s.uniform) {  // a uniform-noise model never predicts [MASK]; the update rule needs p(x_i)
        in.suppress_id = static_cast<int32_t>(run.model->config().mask_token_id);
        for (int64_t p : work.predicted_positions) current.push_back(s.x[static_cast<size_t>(p)]);
        in.current = &current;
    }
    work.predictions = sample(work.logits, work.predicted_positions, in);
}

void finish_device_work(RunCore& run, StepWork& work) {
    for (auto& c : work.device_map_copies) {
        cuda::synchronize(
            c.stream);  // the copies were queued on it (returns at once after the first)
        const auto R = c.levels.size(0), L = c.levels.size(1);
        c.map->levels.assign(c.levels.data_ptr<uint8_t>(), c.levels.data_ptr<uint8_t>() + R * L);
        c.map->row_scale.assign(c.scale.data_ptr<float>(), c.scale.data_ptr<float>() + R);
    }
    work.device_map_copies.clear();
    if (!run.layer_events) return;
    for (size_t l = 0; l < work.layer_marks.size(); ++l) {
        const auto [from, to] = work.layer_marks[l];
        if (from >= 0 && to >= 0) work.rec->layer_ms[l] = run.layer_events->elapsed_ms(from, to);
    }
}

}  // namespace cl::detail

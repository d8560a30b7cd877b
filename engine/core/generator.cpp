#include "engine/core/generator.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include "engine/core/errors.h"
#include "engine/core/llada_net.h"
#include "engine/core/policy.h"
#include "engine/core/trace_worker.h"

namespace cl {

std::vector<int64_t> transfer_schedule(int64_t masked, int64_t steps) {
    std::vector<int64_t> s(static_cast<size_t>(std::max<int64_t>(steps, 0)),
                           steps > 0 ? masked / steps : 0);
    for (int64_t i = 0; i < (steps > 0 ? masked % steps : 0); ++i) s[static_cast<size_t>(i)] += 1;
    return s;
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// SplitMix64: derives independent per-(seed, step, position) streams.
uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The random-remasking confidence of (seed, step, position): a uniform draw in [0, 1) that does
// not depend on the forward, so the commit order is known before it (dKV-Cache-Greedy uses this).
double remask_uniform(uint64_t seed, int32_t step, int64_t pos) {
    const uint64_t s =
        mix(mix(seed ^ 0x72656d61736bull) ^
            mix(static_cast<uint64_t>(step) * 1000003ull + static_cast<uint64_t>(pos)));
    return static_cast<double>(s >> 11) * 0x1.0p-53;
}

}  // namespace

struct Generator::Impl {
    std::shared_ptr<const Model> model;
    detail::LladaNet* net = nullptr;
    GenerationConfig cfg;
    trace::TraceSink* sink = nullptr;
    std::unique_ptr<CachePolicy> policy;
    trace::RunInfo info;

    int64_t P = 0, L = 0, N = 0, B = 0, S = 0;
    std::vector<int32_t> x;               // (L) current tokens
    std::vector<uint8_t> masked;          // (L)
    std::vector<int32_t> last_committed;  // D_{t-1}
    std::vector<int32_t> carried_pred;    // (L) last prediction at a masked row, -1 if none
    std::vector<double> carried_conf;     // (L)
    std::vector<int32_t> last_compute;    // (N, L) step at which K/V were last computed, -1 never
    std::set<int32_t> seen_ids;
    std::vector<int32_t> planned;  // commits known before the forward (random remasking)

    int32_t step_idx = 0, block = 0, step_in_block = 0;
    std::vector<int64_t> schedule;
    bool ended = false;
    trace::RunSummary summary;
    double recompute_sum = 0;
    // Quantises attention maps beside the engine thread when a core is spare (created on the first
    // step that traces attention); null: quantise inline.
    std::unique_ptr<detail::TraceWorker> trace_worker;
    bool trace_worker_decided = false;

    int64_t block_start() const { return P + block * B; }
    int64_t block_end() const { return block_start() + B; }
    bool block_has_masks() const {
        for (int64_t i = block_start(); i < block_end(); ++i)
            if (masked[static_cast<size_t>(i)]) return true;
        return false;
    }

    void note_ids(const std::vector<int32_t>& ids, std::map<int32_t, std::string>& out) {
        for (int32_t id : ids)
            if (id >= 0 && seen_ids.insert(id).second) out[id] = model->tokenizer().token_text(id);
    }

    StepContext context(std::vector<trace::TriggerEvent>* triggers) const {
        StepContext c;
        c.step = step_idx;
        c.block = block;
        c.step_in_block = step_in_block;
        c.prompt_len = P;
        c.seq_len = L;
        c.block_start = block_start();
        c.block_end = block_end();
        c.tokens = &x;
        c.masked = &masked;
        c.decoded_last_step = &last_committed;
        c.triggers = triggers;
        c.last_prediction = &carried_pred;
        c.last_confidence = &carried_conf;
        c.planned_commits = &planned;
        c.certainty_prior = cfg.certainty_prior;
        c.certainty_sigma = cfg.certainty_sigma;
        c.steps_per_block = S;
        return c;
    }

    std::shared_ptr<const trace::StepRecord> step();
};

Generator::Generator(std::shared_ptr<const Model> model, GenerationRequest req,
                     trace::TraceSink* sink)
    : m_impl(std::make_unique<Impl>()) {
    Impl& m = *m_impl;
    m.model = std::move(model);
    m.net = &m.model->net();
    m.cfg = req.config;
    m.sink = sink;
    const auto& mc = m.model->config();
    const auto& tok = m.model->tokenizer();
    std::vector<int32_t> prompt = req.prompt_ids;
    if (prompt.empty() && !req.prompt_text.empty()) {
        const bool templ = req.chat_template && tok.has_chat_tokens();
        prompt = tok.encode(templ ? tok.apply_chat_template(req.prompt_text) : req.prompt_text);
    }
    for (int32_t id : prompt)
        if (id < 0 || id >= mc.vocab_size)
            throw InputError("prompt: token id " + std::to_string(id) +
                             " is outside the vocabulary");
    m.cfg.validate(mc.max_sequence_length, static_cast<int64_t>(prompt.size()));
    m.policy = create_policy(req.policy, req.params);
    if (m.cfg.cfg_scale > 0 && req.policy != "none")
        throw InputError(
            "--cfg-scale: classifier-free guidance is only supported with --policy none");

    m.P = static_cast<int64_t>(prompt.size());
    m.L = m.P + m.cfg.gen_length;
    m.N = mc.n_layers;
    m.B = m.cfg.block_length;
    m.S = m.cfg.steps_per_block();
    m.x = prompt;
    m.x.resize(static_cast<size_t>(m.L), static_cast<int32_t>(mc.mask_token_id));
    m.masked.assign(static_cast<size_t>(m.L), 0);
    for (int64_t i = m.P; i < m.L; ++i) m.masked[static_cast<size_t>(i)] = 1;
    m.carried_pred.assign(static_cast<size_t>(m.L), -1);
    m.carried_conf.assign(static_cast<size_t>(m.L), 0.0);
    m.last_compute.assign(static_cast<size_t>(m.N * m.L), -1);

    auto& info = m.info;
    info.run_id = req.run_id;
    info.policy = req.policy;
    for (const auto& [k, v] : resolve_policy_params(req.policy, req.params)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        info.policy_params[k] = buf;
    }
    info.sampler = m.cfg.to_map();
    info.model_name = m.model->name();
    info.model_hash = m.model->content_hash();
    info.device = m.model->device();
    info.threads = req.threads;
    info.seed = m.cfg.seed;
    info.prompt_text = req.prompt_text;
    info.prompt_len = static_cast<int32_t>(m.P);
    info.gen_len = static_cast<int32_t>(m.cfg.gen_length);
    info.block_len = static_cast<int32_t>(m.B);
    info.steps = static_cast<int32_t>(m.cfg.steps);
    info.n_layers = static_cast<int32_t>(m.N);
    info.n_heads = static_cast<int32_t>(mc.n_heads);
    info.mask_id = static_cast<int32_t>(mc.mask_token_id);
    info.eos_id = static_cast<int32_t>(mc.eos_token_id);
    info.initial_tokens = m.x;
    info.app_version = CL_VERSION;
    for (int32_t id : m.x)
        if (m.seen_ids.insert(id).second) info.token_text[id] = tok.token_text(id);

    c10::InferenceMode guard;
    m.policy->on_run_start(*m.net, m.L);
    if (m.sink) m.sink->on_run_start(info);
}

Generator::~Generator() = default;

bool Generator::done() const {
    return m_impl->block >= m_impl->cfg.num_blocks();
}
const trace::RunInfo& Generator::info() const {
    return m_impl->info;
}
const std::vector<int32_t>& Generator::tokens() const {
    return m_impl->x;
}
int32_t Generator::steps_done() const {
    return m_impl->step_idx;
}

std::string Generator::response_text(bool skip_special) const {
    const Impl& m = *m_impl;
    std::vector<int32_t> resp;
    for (int64_t i = m.P; i < m.L; ++i) {
        const int32_t id = m.x[static_cast<size_t>(i)];
        if (id == m.info.eos_id && skip_special) break;
        if (id == m.info.mask_id) continue;
        resp.push_back(id);
    }
    return m.model->tokenizer().decode(resp, skip_special);
}

std::shared_ptr<const trace::StepRecord> Generator::step() {
    if (done()) return nullptr;
    return m_impl->step();
}

std::shared_ptr<const trace::StepRecord> Generator::Impl::step() {
    c10::InferenceMode guard;
    const auto& mc = model->config();
    const auto t_step = Clock::now();
    auto rec = std::make_shared<trace::StepRecord>();
    rec->run_id = info.run_id;
    rec->step = step_idx;
    rec->block = block;
    rec->step_in_block = step_in_block;
    rec->seq_len = static_cast<int32_t>(L);
    rec->n_layers = static_cast<int32_t>(N);

    const int64_t masked_before = std::count(masked.begin(), masked.end(), uint8_t{1});
    if (step_in_block == 0) {
        int64_t n = 0;
        for (int64_t i = block_start(); i < block_end(); ++i) n += masked[static_cast<size_t>(i)];
        schedule = transfer_schedule(n, S);
        policy->on_block_start(context(&rec->triggers));
    }
    planned.clear();
    if (cfg.remasking == Remasking::Random && !cfg.parallel_decoding() && !cfg.certainty_prior &&
        step_in_block < S) {
        std::vector<std::pair<double, int64_t>> u;
        for (int64_t i = block_start(); i < block_end(); ++i)
            if (masked[static_cast<size_t>(i)])
                u.emplace_back(remask_uniform(cfg.seed, step_idx, i), i);
        std::stable_sort(u.begin(), u.end(),
                         [](const auto& a, const auto& b) { return a.first > b.first; });
        const auto k = std::min<size_t>(
            u.size(), static_cast<size_t>(schedule[static_cast<size_t>(step_in_block)]));
        for (size_t i = 0; i < k; ++i) planned.push_back(static_cast<int32_t>(u[i].second));
    }
    StepContext ctx = context(&rec->triggers);
    policy->begin_step(ctx);

    // Two-phase probes: ask the sink before computing anything optional.
    std::vector<bool> want_mean(static_cast<size_t>(N), false);
    std::vector<std::vector<int32_t>> want_heads(static_cast<size_t>(N));
    if (sink) {
        for (int64_t l = 0; l < N; ++l) {
            trace::ProbeRequest r{trace::ProbeKind::Attention, info.run_id, step_idx,
                                  static_cast<int32_t>(l), -1};
            want_mean[static_cast<size_t>(l)] = sink->wants(r);
            for (int32_t h = 0; h < mc.n_heads; ++h) {
                r.head = h;
                if (sink->wants(r)) want_heads[static_cast<size_t>(l)].push_back(h);
            }
        }
    }

    // Attention maps of this step, filled by the trace worker (or inline); moved into the record
    // once every job has run. The guard waits on every exit path, so no job outlives its map.
    std::vector<std::unique_ptr<trace::AttentionMap>> pending_maps;
    bool wants_maps = false;
    for (size_t l = 0; l < want_mean.size(); ++l)
        wants_maps |= want_mean[l] || !want_heads[l].empty();
    if (wants_maps && !trace_worker_decided) {
        trace_worker_decided = true;
        // Only with a core to spare beside the engine's threads: otherwise the worker would
        // compete with the matrix products it is meant to stay out of the way of.
        if (std::thread::hardware_concurrency() > static_cast<unsigned>(std::max(info.threads, 1)))
            trace_worker = std::make_unique<detail::TraceWorker>();
    }
    struct WaitForTraceJobs {
        detail::TraceWorker* worker;
        ~WaitForTraceJobs() {
            if (!worker) return;
            try {
                worker->wait();
            } catch (...) {  // the step is already failing; its own exception wins
            }
        }
    } wait_guard{trace_worker.get()};

    const auto long_opts = torch::TensorOptions().dtype(torch::kLong);
    auto ids = torch::tensor(std::vector<int64_t>(x.begin(), x.end()), long_opts)
                   .to(net->device());                                         // (L)
    std::vector<std::vector<int64_t>> rows_per_layer(static_cast<size_t>(N));  // empty = all rows
    std::vector<bool> all_rows(static_cast<size_t>(N), true);
    rec->layer_ms.assign(static_cast<size_t>(N), 0.f);

    torch::Tensor logits;                 // (M, V) float32 for the head rows
    std::vector<int64_t> head_positions;  // (M)
    if (cfg.cfg_scale > 0) {
        // Classifier-free guidance: a batch of (conditional, prompt-masked) through the full path.
        auto un = ids.clone();
        un.narrow(0, 0, P).fill_(mc.mask_token_id);
        auto both = net->forward_full(torch::stack({ids, un}));  // (2, L, V)
        auto c = both[0], u = both[1];
        auto guided = u + (cfg.cfg_scale + 1.0) * (c - u);  // (L, V)
        for (int64_t i = 0; i < L; ++i)
            if (masked[static_cast<size_t>(i)]) head_positions.push_back(i);
        logits = guided.index_select(0, torch::tensor(head_positions, long_opts).to(net->device()));
        for (int64_t l = 0; l < N; ++l) rec->layer_ms[static_cast<size_t>(l)] = 0.f;
    } else {
        auto plan_fn = [&](int l) {
            auto p = policy->plan_layer(l);
            if (want_mean[static_cast<size_t>(l)] || !want_heads[static_cast<size_t>(l)].empty())
                p.want_probs = true;
            return p;
        };
        auto observer = [&](const detail::LayerResult& r) {
            policy->observe_layer(r);
            const auto l = static_cast<size_t>(r.layer);
            rec->layer_ms[l] = static_cast<float>(r.ms);
            all_rows[l] = (r.rows == nullptr);
            std::vector<int32_t> row_index;
            if (r.rows) {
                auto cpu = r.rows->to(torch::kCPU).contiguous();
                rows_per_layer[l].assign(cpu.data_ptr<int64_t>(),
                                         cpu.data_ptr<int64_t>() + cpu.numel());
            }
            if (!r.probs.defined()) return;
            if (r.rows)
                row_index.assign(rows_per_layer[l].begin(), rows_per_layer[l].end());
            else
                for (int64_t i = 0; i < L; ++i) row_index.push_back(static_cast<int32_t>(i));
            // (H, R, L) float maps -> the record's 8-bit levels (trace::AttentionMap); the head
            // mean is taken by the quantiser in the same pass (no float mean tensor). The pass
            // runs on the trace worker while the engine computes the next layer; the job keeps
            // the probabilities alive (nothing writes to them after the layer).
            auto store = [&](const torch::Tensor& maps, int32_t head) {  // (H', R, L)
                auto cpu = maps.to(torch::kCPU, torch::kFloat32).contiguous();
                auto a = std::make_unique<trace::AttentionMap>();
                a->layer = r.layer;
                a->head = head;
                a->rows = static_cast<int32_t>(cpu.size(1));
                a->cols = static_cast<int32_t>(cpu.size(2));
                a->row_index = row_index;
                auto job = [map = a.get(), cpu] {
                    map->set_head_mean(cpu.data_ptr<float>(), static_cast<int32_t>(cpu.size(0)));
                };
                pending_maps.push_back(std::move(a));
                // Small maps (a few query rows) cost less to quantise than a thread handoff.
                if (trace_worker && cpu.numel() >= kTraceWorkerMinFloats)
                    trace_worker->submit(std::move(job));
                else
                    job();
            };
            if (want_mean[l]) store(r.probs, -1);
            for (int32_t h : want_heads[l]) store(r.probs.narrow(0, h, 1), h);
        };
        torch::Tensor out_rows;  // (R_last)
        auto hidden =
            net->forward_plan(ids, plan_fn, policy->cache(), observer, out_rows);  // (R_last, D)
        auto rows_cpu = out_rows.to(torch::kCPU).contiguous();
        const int64_t* rp = rows_cpu.data_ptr<int64_t>();
        std::vector<int64_t> local;
        for (int64_t i = 0; i < rows_cpu.numel(); ++i)
            if (masked[static_cast<size_t>(rp[i])]) {
                local.push_back(i);
                head_positions.push_back(rp[i]);
            }
        if (!local.empty())
            logits = net->head(
                hidden.index_select(0, torch::tensor(local, long_opts).to(net->device())));
    }

    // Predictions (float64): x0 by Gumbel-max, confidence by softmax or uniform draw.
    const int64_t M = static_cast<int64_t>(head_positions.size());
    std::vector<int32_t> fresh_pred(static_cast<size_t>(M));
    std::vector<double> fresh_conf(static_cast<size_t>(M));
    if (M > 0) {
        auto lg = logits.to(torch::kCPU, torch::kFloat64).contiguous();  // (M, V)
        const double neg_inf = -std::numeric_limits<double>::infinity();
        if (cfg.logits_eos_inf && info.eos_id >= 0) lg.select(1, info.eos_id).fill_(neg_inf);
        torch::Tensor scores = lg;
        std::vector<double> uniform(static_cast<size_t>(M), 0.0);
        for (int64_t i = 0; i < M; ++i)
            uniform[static_cast<size_t>(i)] =
                remask_uniform(cfg.seed, step_idx, head_positions[static_cast<size_t>(i)]);
        if (cfg.temperature > 0) {
            std::vector<torch::Tensor> noise;
            for (int64_t i = 0; i < M; ++i) {
                const uint64_t s =
                    mix(mix(cfg.seed) ^
                        mix(static_cast<uint64_t>(step_idx) * 1000003ull +
                            static_cast<uint64_t>(head_positions[static_cast<size_t>(i)])));
                auto gen = at::detail::createCPUGenerator(s);
                noise.push_back(
                    torch::rand({lg.size(1)}, gen, torch::TensorOptions().dtype(torch::kFloat64)));
            }
            // exp(logits) / (-log U)^temp, compared in the log domain (same argmax, no overflow).
            auto u = torch::stack(noise).clamp_min(1e-300);  // (M, V)
            scores = lg - cfg.temperature * torch::log(-torch::log(u));
        }
        auto x0 = scores.argmax(1).contiguous();  // (M)
        auto conf_logits = lg;
        if (cfg.confidence_eos_eot_inf) {
            conf_logits = lg.clone();
            if (info.eos_id >= 0) conf_logits.select(1, info.eos_id).fill_(neg_inf);
            if (model->eot_id() >= 0) conf_logits.select(1, model->eot_id()).fill_(neg_inf);
        }
        auto full_probs = torch::softmax(conf_logits, 1);                            // (M, V)
        auto probs = full_probs.gather(1, x0.unsqueeze(1)).squeeze(1).contiguous();  // (M)
        // Inspector data: top-k candidates, entropy and margin of each predicted row.
        const int64_t K = std::min<int64_t>(trace::StepRecord::kTopK, full_probs.size(1));
        auto softmax = cfg.confidence_eos_eot_inf ? torch::softmax(lg, 1)
                                                  : full_probs;  // (M, V) of the raw logits
        auto [top_p, top_i] = softmax.topk(K, 1);                // (M, K)
        auto ent = -(softmax * torch::log_softmax(lg, 1)).nan_to_num(0.0).sum(1);  // (M)
        // Read results through raw pointers: per-element .item() calls cost more than the forward
        // of a small model when hundreds of rows are predicted.
        top_p = top_p.contiguous();
        top_i = top_i.contiguous();
        ent = ent.contiguous();
        x0 = x0.contiguous();
        const double* tp = top_p.data_ptr<double>();
        const int64_t* ti = top_i.data_ptr<int64_t>();
        const double* en = ent.data_ptr<double>();
        const int64_t* x0p = x0.data_ptr<int64_t>();
        const double* pp = probs.data_ptr<double>();
        constexpr auto kK = static_cast<size_t>(trace::StepRecord::kTopK);
        rec->topk_ids.assign(static_cast<size_t>(L) * kK, -1);
        rec->topk_probs.assign(static_cast<size_t>(L) * kK,
                               std::numeric_limits<float>::quiet_NaN());
        rec->entropy.assign(static_cast<size_t>(L), std::numeric_limits<float>::quiet_NaN());
        rec->margin.assign(static_cast<size_t>(L), std::numeric_limits<float>::quiet_NaN());
        for (int64_t i = 0; i < M; ++i) {
            const auto pos = static_cast<size_t>(head_positions[static_cast<size_t>(i)]);
            for (int64_t k2 = 0; k2 < K; ++k2) {
                rec->topk_ids[pos * kK + static_cast<size_t>(k2)] =
                    static_cast<int32_t>(ti[i * K + k2]);
                rec->topk_probs[pos * kK + static_cast<size_t>(k2)] =
                    static_cast<float>(tp[i * K + k2]);
            }
            rec->entropy[pos] = static_cast<float>(en[i]);
            rec->margin[pos] = K > 1 ? static_cast<float>(tp[i * K] - tp[i * K + 1]) : 1.f;
        }
        for (int64_t i = 0; i < M; ++i) {
            fresh_pred[static_cast<size_t>(i)] = static_cast<int32_t>(x0p[i]);
            double c = pp[i];
            if (cfg.remasking == Remasking::Random) c = uniform[static_cast<size_t>(i)];
            fresh_conf[static_cast<size_t>(i)] = c;
        }
    }
    for (int64_t i = 0; i < M; ++i) {
        carried_pred[static_cast<size_t>(head_positions[static_cast<size_t>(i)])] =
            fresh_pred[static_cast<size_t>(i)];
        carried_conf[static_cast<size_t>(head_positions[static_cast<size_t>(i)])] =
            fresh_conf[static_cast<size_t>(i)];
    }

    // Candidates: masked rows of the current block predicted by this step's forward. Rows a policy
    // did not recompute keep their last prediction for ranking (d2Cache) but cannot be committed.
    std::vector<uint8_t> fresh(static_cast<size_t>(L), 0);
    for (int64_t pos : head_positions) fresh[static_cast<size_t>(pos)] = 1;
    std::vector<std::pair<double, int64_t>> cand;  // (score, position)
    std::vector<double> density;
    if (cfg.certainty_prior) {
        // D(i) = sum_j exp(-(i-j)^2 / 2 sigma^2) [j known] / sum_j exp(-(i-j)^2 / 2 sigma^2)
        density.assign(static_cast<size_t>(L), 0.0);
        const double two_s2 = 2.0 * cfg.certainty_sigma * cfg.certainty_sigma;
        const int64_t reach = static_cast<int64_t>(std::ceil(cfg.certainty_sigma * 6));
        for (int64_t i = block_start(); i < block_end(); ++i) {
            double num = 0, den = 0;
            for (int64_t j = std::max<int64_t>(0, i - reach); j < std::min(L, i + reach + 1); ++j) {
                const double k = std::exp(-static_cast<double>((i - j) * (i - j)) / two_s2);
                den += k;
                if (!masked[static_cast<size_t>(j)]) num += k;
            }
            density[static_cast<size_t>(i)] = den > 0 ? num / den : 0;
        }
    }
    for (int64_t i = block_start(); i < block_end(); ++i) {
        if (!masked[static_cast<size_t>(i)] || !fresh[static_cast<size_t>(i)]) continue;
        double score = carried_conf[static_cast<size_t>(i)];
        if (cfg.certainty_prior) score *= density[static_cast<size_t>(i)];
        cand.emplace_back(score, i);
    }
    // Highest score first; ties broken by position so the order is deterministic.
    std::stable_sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    size_t k = 0;
    if (cand.empty()) {
        k = 0;
    } else if (cfg.threshold > 0) {
        while (k < cand.size() &&
               carried_conf[static_cast<size_t>(cand[k].second)] >= cfg.threshold)
            ++k;
        k = std::max<size_t>(k, 1);
    } else if (cfg.factor > 0) {
        while (k < cand.size() && cand[k].first >= 1.0 - cfg.factor / static_cast<double>(k + 2))
            ++k;
        k = std::max<size_t>(k, 1);
    } else if (step_in_block < S) {
        k = static_cast<size_t>(schedule[static_cast<size_t>(step_in_block)]);
    } else {
        k = cand.size();  // overtime (a policy left masks behind): finish the block
    }
    k = std::min(k, cand.size());

    // Oracle mode: a full forward beside the cached one, to measure what staleness costs.
    const bool oracle = sink && cfg.cfg_scale == 0 &&
                        sink->wants({trace::ProbeKind::Oracle, info.run_id, step_idx, -1, -1});
    if (oracle) {
        rec->has_oracle = true;
        auto& o = rec->oracle;
        const float nan = std::numeric_limits<float>::quiet_NaN();
        o.k_cos.assign(static_cast<size_t>(N * L), nan);
        o.v_cos = o.k_rel_l2 = o.v_rel_l2 = o.k_cos;
        auto fresh_cache = net->make_cache(L, false);
        torch::Tensor orows;
        auto ohidden = net->forward_plan(
            ids, [](int) { return detail::LayerPlan{}; }, fresh_cache, {}, orows);  // (L, D)
        auto& pc = policy->cache();
        for (int64_t l = 0; l < N; ++l) {
            const auto& used = pc[static_cast<size_t>(l)];
            if (!used.k.defined() || !used.v.defined()) continue;  // nothing cached at this layer
            auto compare = [&](const torch::Tensor& a, const torch::Tensor& b,
                               std::vector<float>& cos_out, std::vector<float>& rel_out) {
                auto x = a.transpose(0, 1).reshape({L, -1}).to(torch::kCPU,
                                                               torch::kFloat64);  // (L, Hkv*Dh)
                auto y = b.transpose(0, 1).reshape({L, -1}).to(torch::kCPU, torch::kFloat64);
                auto cos = torch::cosine_similarity(x, y, 1, 1e-12).contiguous();  // (L)
                auto rel =
                    ((x - y).norm(2, 1) / y.norm(2, 1).clamp_min(1e-12)).contiguous();  // (L)
                const double* cp = cos.data_ptr<double>();
                const double* rp = rel.data_ptr<double>();
                for (int64_t i = 0; i < L; ++i) {
                    cos_out[static_cast<size_t>(l * L + i)] = static_cast<float>(cp[i]);
                    rel_out[static_cast<size_t>(l * L + i)] = static_cast<float>(rp[i]);
                }
            };
            compare(used.k, fresh_cache[static_cast<size_t>(l)].k, o.k_cos, o.k_rel_l2);
            compare(used.v, fresh_cache[static_cast<size_t>(l)].v, o.v_cos, o.v_rel_l2);
        }
        if (M > 0) {
            auto pos = torch::tensor(head_positions, long_opts).to(net->device());
            auto full_logits =
                net->head(ohidden.index_select(0, pos)).to(torch::kCPU, torch::kFloat64);  // (M, V)
            auto cached_logits = logits.to(torch::kCPU, torch::kFloat64);
            auto lp_full = torch::log_softmax(full_logits, 1),
                 lp_cached = torch::log_softmax(cached_logits, 1);
            o.logits_kl = (lp_full.exp() * (lp_full - lp_cached)).sum(1).mean().item<double>();
            auto full_x0 = full_logits.argmax(1).contiguous();
            for (size_t c = 0; c < k; ++c) {
                const int64_t p = cand[c].second;
                const auto it = std::find(head_positions.begin(), head_positions.end(), p);
                if (full_x0[it - head_positions.begin()].item<int64_t>() !=
                    carried_pred[static_cast<size_t>(p)])
                    o.commit_differs = true;
            }
        }
    }

    std::vector<int32_t> committed;
    for (size_t c = 0; c < k; ++c) {
        const auto pos = static_cast<size_t>(cand[c].second);
        x[pos] = carried_pred[pos];
        masked[pos] = 0;
        carried_pred[pos] = -1;
        committed.push_back(static_cast<int32_t>(pos));
    }

    // ---- the step record -------------------------------------------------------------------
    rec->tokens = x;
    rec->committed = committed;
    rec->states.assign(static_cast<size_t>(L), trace::TokenState::DecodedEarlier);
    for (int64_t i = 0; i < L; ++i) {
        if (i < P)
            rec->states[static_cast<size_t>(i)] = trace::TokenState::Prompt;
        else if (masked[static_cast<size_t>(i)])
            rec->states[static_cast<size_t>(i)] = trace::TokenState::Masked;
    }
    for (int32_t c : committed) rec->states[static_cast<size_t>(c)] = trace::TokenState::DecodedNow;
    rec->predicted.assign(static_cast<size_t>(L), -1);
    rec->confidence.assign(static_cast<size_t>(L), std::numeric_limits<float>::quiet_NaN());
    for (int64_t i = 0; i < M; ++i) {
        rec->predicted[static_cast<size_t>(head_positions[static_cast<size_t>(i)])] =
            fresh_pred[static_cast<size_t>(i)];
        rec->confidence[static_cast<size_t>(head_positions[static_cast<size_t>(i)])] =
            static_cast<float>(fresh_conf[static_cast<size_t>(i)]);
    }
    note_ids(rec->tokens, rec->new_token_text);
    note_ids(rec->predicted, rec->new_token_text);
    note_ids(rec->topk_ids, rec->new_token_text);

    rec->actions.assign(static_cast<size_t>(N * L), trace::RowAction::KvReused);
    rec->cache_age.assign(static_cast<size_t>(N * L), 0);
    double flops = 0;
    for (int64_t l = 0; l < N; ++l) {
        const size_t base = static_cast<size_t>(l * L);
        int64_t R = L;
        if (all_rows[static_cast<size_t>(l)]) {
            for (int64_t i = 0; i < L; ++i)
                rec->actions[base + static_cast<size_t>(i)] = trace::RowAction::Recomputed;
        } else {
            R = static_cast<int64_t>(rows_per_layer[static_cast<size_t>(l)].size());
            for (int64_t r : rows_per_layer[static_cast<size_t>(l)])
                rec->actions[base + static_cast<size_t>(r)] = trace::RowAction::Recomputed;
        }
        flops += detail::layer_flops(mc, R, L);
    }
    policy->annotate(rec->actions);
    for (size_t i = 0; i < rec->actions.size(); ++i) {
        if (rec->actions[i] == trace::RowAction::Recomputed) last_compute[i] = step_idx;
        rec->cache_age[i] = static_cast<uint16_t>(std::min(65535, step_idx - last_compute[i]));
    }
    const double cfg_mult = cfg.cfg_scale > 0 ? 2.0 : 1.0;
    rec->flops = cfg_mult * (flops + detail::head_flops(mc, M));
    rec->flops_full = cfg_mult * (static_cast<double>(N) * detail::layer_flops(mc, L, L) +
                                  detail::head_flops(mc, masked_before));

    policy->on_step_end(ctx, committed);
    last_committed = committed;
    ++step_idx;
    ++step_in_block;
    const bool block_done = !block_has_masks() && (cfg.parallel_decoding() || step_in_block >= S);
    if (block_done) {
        policy->on_block_end(context(&rec->triggers));
        ++block;
        step_in_block = 0;
    } else if (step_in_block >= S + B + 1) {
        throw RuntimeFailure("policy '" + info.policy + "' made no progress in block " +
                             std::to_string(block));
    }
    if (trace_worker) trace_worker->wait();  // the record is complete before it is published
    rec->attention.reserve(pending_maps.size());
    for (auto& a : pending_maps) rec->attention.push_back(std::move(*a));
    rec->wall_ms = ms_since(t_step);

    summary.steps = step_idx;
    summary.wall_ms += rec->wall_ms;
    summary.flops += rec->flops;
    summary.flops_full += rec->flops_full;
    recompute_sum += rec->recompute_fraction();
    summary.recompute_fraction = recompute_sum / step_idx;
    std::shared_ptr<const trace::StepRecord> out = rec;
    if (sink) sink->publish(out);
    return out;
}

trace::RunSummary Generator::summary() const {
    const Impl& m = *m_impl;
    trace::RunSummary s = m.summary;
    s.final_tokens = m.x;
    int32_t gen = 0;
    for (int64_t i = m.P; i < m.L; ++i) {
        const int32_t id = m.x[static_cast<size_t>(i)];
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

#include "engine/generation/sampler.h"

#include <atomic>
#include <limits>
#include <optional>

#include "engine/generation/counter_rng.h"
#include "engine/generation/row_sampler.h"
#include "engine/kernels/kernel_choice.h"

namespace cl::detail {
namespace {

// SplitMix64: the remasking draws' key hash (kept from the first sampler so that random-remasking
// runs at temperature 0 keep their tokens).
uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

template <typename T, typename Out>
std::vector<Out> to_host(const torch::Tensor& t) {  // any device -> host vector
    auto cpu = t.to(torch::kCPU).contiguous();
    const T* p = cpu.data_ptr<T>();
    return std::vector<Out>(p, p + cpu.numel());
}

// Dream's top-p then top-k filters: tokens outside them get -inf, so they can be neither sampled
// nor counted in the confidence. The nucleus is taken on the temperature-scaled distribution, as
// Dream does; ties at the k-th logit are kept (as in Dream's top_k_logits).
void filter_logits(torch::Tensor& lg, const GenerationConfig& cfg) {  // (M, V) float64
    const double neg_inf = -std::numeric_limits<double>::infinity();
    if (cfg.top_p < 1.0) {
        auto scaled = cfg.temperature > 0 ? lg / cfg.temperature : lg;  // (M, V)
        auto [sorted, order] = scaled.sort(1, /*descending=*/true);     // (M, V)
        auto p = torch::softmax(sorted, 1);                             // (M, V)
        // Token j (sorted) goes when the tokens before it already hold more than top_p.
        auto drop_sorted = (p.cumsum(1) - p) > cfg.top_p;  // (M, V)
        auto drop = torch::zeros_like(drop_sorted).scatter(1, order, drop_sorted);
        lg.masked_fill_(drop, neg_inf);
    }
    if (cfg.top_k > 0 && cfg.top_k < lg.size(1)) {
        auto kth = std::get<0>(lg.topk(cfg.top_k, 1)).select(1, cfg.top_k - 1).unsqueeze(1);
        lg.masked_fill_(lg < kth, neg_inf);  // kth: (M, 1)
    }
}

// The ranking score of each position under the confidence algorithm, from the distribution the
// predictions are drawn from: probs (M, V), x0 (M).
torch::Tensor confidence_of(const torch::Tensor& probs, const torch::Tensor& x0, Remasking r) {
    switch (r) {
        case Remasking::TopkMargin: {
            auto top2 = std::get<0>(probs.topk(std::min<int64_t>(2, probs.size(1)), 1));  // (M, 2)
            return top2.size(1) > 1 ? top2.select(1, 0) - top2.select(1, 1) : top2.select(1, 0);
        }
        case Remasking::Entropy:  // minus the entropy: the most certain position first
            return (probs * torch::log(probs)).nan_to_num(0.0).sum(1);  // (M)
        case Remasking::LowConfidence:
        case Remasking::Random:
            break;  // Random's draws replace it on the host
    }
    return probs.gather(1, x0.unsqueeze(1)).squeeze(1);  // (M)
}

}  // namespace

double remask_uniform(uint64_t seed, int32_t step, int64_t position) {
    const uint64_t s =
        mix(mix(seed ^ 0x72656d61736bull) ^
            mix(static_cast<uint64_t>(step) * 1000003ull + static_cast<uint64_t>(position)));
    return static_cast<double>(s >> 11) * 0x1.0p-53;
}

Predictions sample_with_tensors(const torch::Tensor& logits, const std::vector<int64_t>& positions,
                                const SamplerInputs& in) {
    const GenerationConfig& cfg = *in.cfg;
    const double neg_inf = -std::numeric_limits<double>::infinity();
    auto lg = logits.to(torch::kFloat64).contiguous();  // (M, V)
    if (cfg.logits_eos_inf && in.eos_id >= 0) lg.select(1, in.eos_id).fill_(neg_inf);
    if (in.suppress_id >= 0) lg.select(1, in.suppress_id).fill_(neg_inf);
    const auto model_lg = lg;  // the inspector's view: before the sampling filters
    const bool filtered = cfg.top_p < 1.0 || cfg.top_k > 0;
    if (filtered) {
        lg = lg.clone();
        filter_logits(lg, cfg);
    }
    torch::Tensor scores = lg;
    if (cfg.temperature > 0) {
        // exp(logits) / (-log U)^temp, compared in the log domain (same argmax, no overflow).
        auto u = counter_uniform(cfg.seed, in.step, positions, lg.size(1), lg.device());  // (M, V)
        scores = lg - cfg.temperature * torch::log(-torch::log(u));
    }
    auto x0 = scores.argmax(1);  // (M)
    auto conf_logits = lg;
    if (cfg.confidence_eos_eot_inf) {
        conf_logits = lg.clone();
        if (in.eos_id >= 0) conf_logits.select(1, in.eos_id).fill_(neg_inf);
        if (in.eot_id >= 0) conf_logits.select(1, in.eot_id).fill_(neg_inf);
    }
    auto full_probs = torch::softmax(conf_logits, 1);           // (M, V)
    auto probs = confidence_of(full_probs, x0, cfg.remasking);  // (M)
    const int64_t K = std::min<int64_t>(in.top_k, full_probs.size(1));
    const bool same = !cfg.confidence_eos_eot_inf && !filtered;
    auto softmax = same ? full_probs : torch::softmax(model_lg, 1);                  // (M, V)
    auto [top_p, top_i] = softmax.topk(K, 1);                                        // (M, K)
    auto ent = -(softmax * torch::log_softmax(model_lg, 1)).nan_to_num(0.0).sum(1);  // (M)

    Predictions out;
    out.top_k = K;
    out.token = to_host<int64_t, int32_t>(x0);
    out.confidence = to_host<double, double>(probs);
    out.topk_ids = to_host<int64_t, int32_t>(top_i);
    out.topk_probs = to_host<double, double>(top_p);
    out.entropy = to_host<double, double>(ent);
    if (in.current) {
        auto cur = torch::tensor(std::vector<int64_t>(in.current->begin(), in.current->end()))
                       .to(lg.device());  // (M)
        out.current_prob = to_host<double, double>(full_probs.gather(1, cur.unsqueeze(1)));
    }
    return out;
}

namespace {

// Logits per task of the row path (about 2 ns a logit: 8 us a task, a few times what waking the
// other thread costs). Was 16 rows whatever the vocabulary: a cached step's dozen rows of 1024
// logits then ran on one thread (elastic 0.8% faster at 2 threads, paired steps), and 16 rows of
// LLaDA's 126k logits were one task.
constexpr int64_t kSamplerLogitsPerTask = 4096;

// Row i's predictions from its summary (row_sampler.h): row (V) float64 with the excluded ids at
// -inf, ids (>= max(K, 2) where V allows) its largest logits' ids.
void fill_row(Predictions& out, int64_t i, const RowSummary& s, const double* row,
              const int32_t* ids, int64_t V, const SamplerInputs& in) {
    const auto p = [&](int32_t id) { return probability_of(s, row[id]); };
    const auto u = static_cast<size_t>(i);
    const int64_t K = out.top_k;
    out.token[u] = ids[0];
    for (int64_t j = 0; j < K; ++j) {
        out.topk_ids[u * static_cast<size_t>(K) + static_cast<size_t>(j)] = ids[j];
        out.topk_probs[u * static_cast<size_t>(K) + static_cast<size_t>(j)] = p(ids[j]);
    }
    out.entropy[u] = s.entropy;
    switch (in.cfg->remasking) {
        case Remasking::TopkMargin:
            out.confidence[u] = V > 1 ? p(ids[0]) - p(ids[1]) : p(ids[0]);
            break;
        case Remasking::Entropy:
            out.confidence[u] = -s.entropy;
            break;
        case Remasking::LowConfidence:
        case Remasking::Random:
            out.confidence[u] = p(ids[0]);
            break;
    }
    if (in.current) out.current_prob[u] = p((*in.current)[u]);
}

// The row path (a fast kernel, kernel_choice.h) where its results are the tensor ops': float32
// logits on the CPU, argmax decoding (temperature 0), no top-p / top-k filter and the confidence on
// the unfiltered softmax. Nothing where a row holds a NaN or +inf logit: the tensor ops define what
// those give.
std::optional<Predictions> sample_rows(const torch::Tensor& logits, const SamplerInputs& in) {
    const GenerationConfig& cfg = *in.cfg;
    if (!fast_kernels() || !logits.device().is_cpu() || logits.scalar_type() != torch::kFloat32 ||
        logits.dim() != 2 || cfg.top_p < 1.0 || cfg.top_k > 0 || cfg.temperature != 0.0 ||
        cfg.confidence_eos_eot_inf)
        return std::nullopt;
    const auto lg = logits.contiguous();  // (M, V)
    const int64_t M = lg.size(0), V = lg.size(1);
    if (V == 0) return std::nullopt;
    Predictions out;
    out.top_k = std::min<int64_t>(in.top_k, V);
    const int64_t kept = std::min<int64_t>(std::max<int64_t>(out.top_k, 2), V);  // x0, margin
    const auto rows = static_cast<size_t>(M);
    out.token.resize(rows);
    out.confidence.resize(rows);
    out.topk_ids.resize(rows * static_cast<size_t>(out.top_k));
    out.topk_probs.resize(out.topk_ids.size());
    out.entropy.resize(rows);
    if (in.current) out.current_prob.resize(rows);
    const int32_t eos = cfg.logits_eos_inf ? in.eos_id : -1;
    const float* x = lg.data_ptr<float>();
    std::atomic<bool> all_finite{true};
    const int64_t rows_per_task = std::max<int64_t>(1, kSamplerLogitsPerTask / V);
    at::parallel_for(0, M, rows_per_task, [&](int64_t begin, int64_t end) {
        std::vector<double> row(static_cast<size_t>(V));      // (V)
        std::vector<int32_t> ids(static_cast<size_t>(kept));  // (kept)
        for (int64_t i = begin; i < end; ++i) {
            const RowSummary s =
                summarize_row(x + i * V, V, eos, in.suppress_id, kept, row.data(), ids.data());
            if (!s.finite) {
                all_finite = false;
                return;
            }
            fill_row(out, i, s, row.data(), ids.data(), V, in);
        }
    });
    if (!all_finite) return std::nullopt;
    return out;
}

}  // namespace

Predictions sample(const torch::Tensor& logits, const std::vector<int64_t>& positions,
                   const SamplerInputs& in) {
    std::optional<Predictions> rows = sample_rows(logits, in);
    Predictions out = rows ? std::move(*rows) : sample_with_tensors(logits, positions, in);
    if (in.cfg->remasking == Remasking::Random)
        for (size_t i = 0; i < positions.size(); ++i)
            out.confidence[i] = remask_uniform(in.cfg->seed, in.step, positions[i]);
    return out;
}

}  // namespace cl::detail

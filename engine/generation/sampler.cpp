#include "engine/generation/sampler.h"

#include <limits>

#include "engine/generation/counter_rng.h"

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

Predictions sample(const torch::Tensor& logits, const std::vector<int64_t>& positions,
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
    if (cfg.remasking == Remasking::Random)
        for (size_t i = 0; i < positions.size(); ++i)
            out.confidence[i] = remask_uniform(cfg.seed, in.step, positions[i]);
    return out;
}

}  // namespace cl::detail

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
    auto full_probs = torch::softmax(conf_logits, 1);               // (M, V)
    auto probs = full_probs.gather(1, x0.unsqueeze(1)).squeeze(1);  // (M)
    const int64_t K = std::min<int64_t>(in.top_k, full_probs.size(1));
    auto softmax = cfg.confidence_eos_eot_inf ? torch::softmax(lg, 1) : full_probs;  // raw logits
    auto [top_p, top_i] = softmax.topk(K, 1);                                        // (M, K)
    auto ent = -(softmax * torch::log_softmax(lg, 1)).nan_to_num(0.0).sum(1);        // (M)

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

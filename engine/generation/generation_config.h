// GenerationConfig: the sampler settings of POLICIES.md section 1 (LLaDA generate.py semantics
// plus Fast-dLLM parallel decoding, d2Cache certainty-prior decoding, LLaDA's EOS options and
// Dream's diffusion_generate options: top-p, top-k, its confidence algorithms, alg_temp and its
// transfer schedule).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace cl {

// How a masked position's confidence is scored (Dream's `alg` in brackets): LowConfidence, the
// probability of the predicted token (maskgit_plus); Random, a uniform draw (origin); TopkMargin,
// top-1 minus top-2 probability; Entropy, minus the entropy of the prediction.
enum class Remasking { LowConfidence, Random, TopkMargin, Entropy };
// How many masks a step commits: Even, LLaDA's floor(n / T) plus one for the first n mod T steps;
// Dream, int(masked * (1 - s / t)) over timesteps linspace(1, 1e-3, T + 1) and everything at the
// last step (with Random remasking each mask is committed with probability 1 - s / t instead).
enum class TransferSchedule { Even, Dream };
// Under uniform noise, which in-block positions a step updates (docs/uniform-noise.md):
// Adaptive: the largest shift of probability mass onto the top token, p(top) - p(current token);
// Confidence: the largest p(top). Only positions whose top token differs from their token count.
enum class UpdateRule { Adaptive, Confidence };

struct GenerationConfig {
    int64_t gen_length = 128;   // G
    int64_t block_length = 32;  // B; G % B == 0
    int64_t steps = 128;        // T; T % (G / B) == 0
    double temperature = 0.0;   // Gumbel-max temperature in float64; 0 = argmax
    double cfg_scale = 0.0;     // classifier-free guidance; 0 = off
    Remasking remasking = Remasking::LowConfidence;
    TransferSchedule schedule = TransferSchedule::Even;
    double top_p = 1.0;            // sample from the smallest set of tokens holding top_p (1 = all)
    int64_t top_k = 0;             // sample from the k most likely tokens (0 = all)
    double alg_temp = 0.0;         // > 0: the committed positions are drawn by softmax(confidence /
                                   // alg_temp) without replacement (Dream); 0 = the most confident
    double threshold = 0.0;        // > 0: commit every in-block mask with confidence >= threshold
    double factor = 0.0;           // > 0: commit the top-n while c_(n) >= 1 - factor / (n + 1)
    bool certainty_prior = false;  // d2Cache: rank by confidence x local density of known tokens
    double certainty_sigma = 10.0;
    bool logits_eos_inf = false;          // never predict EOS
    bool confidence_eos_eot_inf = false;  // a predicted EOS/EoT gets confidence 0 (committed last)
    UpdateRule update_rule = UpdateRule::Adaptive;  // uniform-noise models only
    // The first n positions are recomputed at every step under every policy, besides the rows
    // the policy chooses: prompt rows whose K/V a model rewrites as the answer forms (the Dream
    // model keeps state in its ChatML system prompt's rows; docs/performance.md, "The same on the
    // Dream..."). kSystemTurn: the rows of the chat template's system turn, resolved when the run
    // starts.
    static constexpr int64_t kSystemTurn = -1;
    int64_t fresh_prefix = 0;
    uint64_t seed = 0;

    int64_t num_blocks() const { return block_length > 0 ? gen_length / block_length : 0; }
    int64_t steps_per_block() const { return num_blocks() > 0 ? steps / num_blocks() : 0; }
    bool parallel_decoding() const { return threshold > 0.0 || factor > 0.0; }
    // Throws InputError naming the option (e.g. "--block-length") on inconsistent settings.
    void validate(int64_t max_sequence_length, int64_t prompt_length) const;
    std::map<std::string, std::string> to_map() const;
};

const char* to_string(Remasking r);
// low_confidence, random, topk_margin, entropy, or Dream's maskgit_plus / origin; throws InputError
// for anything else.
Remasking parse_remasking(const std::string& text);
const char* to_string(TransferSchedule s);
// Throws InputError for anything but even / dream.
TransferSchedule parse_transfer_schedule(const std::string& text);
const char* to_string(UpdateRule r);
// Throws InputError for anything but adaptive / confidence.
UpdateRule parse_update_rule(const std::string& text);
// A row count, or "system" (GenerationConfig::kSystemTurn); throws InputError for anything else.
int64_t parse_fresh_prefix(const std::string& text);

}  // namespace cl

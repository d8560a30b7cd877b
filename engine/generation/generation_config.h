// GenerationConfig: the sampler settings of POLICIES.md section 1 (LLaDA generate.py semantics
// plus Fast-dLLM parallel decoding, d2Cache certainty-prior decoding and LLaDA's EOS options).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace cl {

enum class Remasking { LowConfidence, Random };
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
    double threshold = 0.0;        // > 0: commit every in-block mask with confidence >= threshold
    double factor = 0.0;           // > 0: commit the top-n while c_(n) >= 1 - factor / (n + 1)
    bool certainty_prior = false;  // d2Cache: rank by confidence x local density of known tokens
    double certainty_sigma = 10.0;
    bool logits_eos_inf = false;          // never predict EOS
    bool confidence_eos_eot_inf = false;  // a predicted EOS/EoT gets confidence 0 (committed last)
    UpdateRule update_rule = UpdateRule::Adaptive;  // uniform-noise models only
    uint64_t seed = 0;

    int64_t num_blocks() const { return block_length > 0 ? gen_length / block_length : 0; }
    int64_t steps_per_block() const { return num_blocks() > 0 ? steps / num_blocks() : 0; }
    bool parallel_decoding() const { return threshold > 0.0 || factor > 0.0; }
    // Throws InputError naming the option (e.g. "--block-length") on inconsistent settings.
    void validate(int64_t max_sequence_length, int64_t prompt_length) const;
    std::map<std::string, std::string> to_map() const;
};

const char* to_string(Remasking r);
// Throws InputError for anything but low_confidence / random.
Remasking parse_remasking(const std::string& text);
const char* to_string(UpdateRule r);
// Throws InputError for anything but adaptive / confidence.
UpdateRule parse_update_rule(const std::string& text);

}  // namespace cl

#include "engine/generation/generation_config.h"

#include <cmath>

#include "engine/base/errors.h"

namespace cl {

const char* to_string(Remasking r) {
    switch (r) {
        case Remasking::Random:
            return "random";
        case Remasking::TopkMargin:
            return "topk_margin";
        case Remasking::Entropy:
            return "entropy";
        case Remasking::LowConfidence:
            break;
    }
    return "low_confidence";
}

Remasking parse_remasking(const std::string& text) {
    if (text == "low_confidence" || text == "maskgit_plus") return Remasking::LowConfidence;
    if (text == "random" || text == "origin") return Remasking::Random;
    if (text == "topk_margin") return Remasking::TopkMargin;
    if (text == "entropy") return Remasking::Entropy;
    throw InputError(Setting{"remasking"},
                     "expected low_confidence, random, topk_margin or entropy (or Dream's "
                     "maskgit_plus, origin), got '" +
                         text + "'");
}

const char* to_string(TransferSchedule s) {
    return s == TransferSchedule::Dream ? "dream" : "even";
}

TransferSchedule parse_transfer_schedule(const std::string& text) {
    if (text == "even") return TransferSchedule::Even;
    if (text == "dream") return TransferSchedule::Dream;
    throw InputError(Setting{"schedule"}, "expected even or dream, got '" + text + "'");
}

const char* to_string(UpdateRule r) {
    return r == UpdateRule::Confidence ? "confidence" : "adaptive";
}

UpdateRule parse_update_rule(const std::string& text) {
    if (text == "adaptive") return UpdateRule::Adaptive;
    if (text == "confidence") return UpdateRule::Confidence;
    throw InputError(Setting{"update_rule"}, "expected adaptive or confidence, got '" + text + "'");
}

int64_t parse_fresh_prefix(const std::string& text) {
    if (text == "system") return GenerationConfig::kSystemTurn;
    size_t used = 0;
    int64_t rows = -1;
    try {
        rows = std::stoll(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (text.empty() || used != text.size() || rows < 0)
        throw InputError(Setting{"fresh_prefix"},
                         "expected a number of rows or 'system', got '" + text + "'");
    return rows;
}

void GenerationConfig::validate(int64_t max_sequence_length, int64_t prompt_length) const {
    if (gen_length < 1 || gen_length > 65536)
        throw InputError(Setting{"gen_length"},
                         "must be between 1 and 65536, got " + std::to_string(gen_length));
    if (block_length < 1 || block_length > gen_length)
        throw InputError(Setting{"block_length"}, "must be between 1 and gen_length (" +
                                                      std::to_string(gen_length) + "), got " +
                                                      std::to_string(block_length));
    if (gen_length % block_length != 0)
        throw InputError(Setting{"block_length"}, std::to_string(block_length) +
                                                      " does not divide --gen-length " +
                                                      std::to_string(gen_length));
    if (steps < 1 || steps > 1'000'000)
        throw InputError(Setting{"steps"}, "must be between 1 and 1000000");
    if (steps % num_blocks() != 0)
        throw InputError(Setting{"steps"}, std::to_string(steps) +
                                               " is not a multiple of the number of blocks (" +
                                               std::to_string(num_blocks()) + ")");
    if (!(temperature >= 0.0) || !std::isfinite(temperature) || temperature > 100)
        throw InputError(Setting{"temperature"}, "must be between 0 and 100");
    if (!(cfg_scale >= 0.0) || !std::isfinite(cfg_scale) || cfg_scale > 100)
        throw InputError(Setting{"cfg_scale"}, "must be between 0 and 100");
    if (!(threshold >= 0.0 && threshold <= 1.0))
        throw InputError(Setting{"threshold"}, "must be between 0 and 1");
    if (!(factor >= 0.0) || !std::isfinite(factor) || factor > 100)
        throw InputError(Setting{"factor"}, "must be between 0 and 100");
    if (threshold > 0 && factor > 0)
        throw InputError(Setting{"threshold"}, "threshold and factor cannot both be set");
    if (!(top_p > 0.0 && top_p <= 1.0)) throw InputError(Setting{"top_p"}, "must be in (0, 1]");
    if (top_k < 0 || top_k > 100'000'000)
        throw InputError(Setting{"top_k"}, "must be between 0 (off) and 100000000");
    if (!(alg_temp >= 0.0) || !std::isfinite(alg_temp) || alg_temp > 100)
        throw InputError(Setting{"alg_temp"}, "must be between 0 and 100");
    if (!(certainty_sigma > 0.0) || !std::isfinite(certainty_sigma))
        throw InputError(Setting{"certainty_sigma"}, "must be positive");
    if (fresh_prefix < kSystemTurn || fresh_prefix > prompt_length)
        throw InputError(Setting{"fresh_prefix"},
                         std::string("must be 'system' or between 0 and the prompt length (")
                             .append(std::to_string(prompt_length))
                             .append(" tokens), got ")
                             .append(std::to_string(fresh_prefix)));
    if (prompt_length + gen_length > max_sequence_length)
        throw InputError(Setting{"gen_length"}, "prompt (" + std::to_string(prompt_length) +
                                                    " tokens) + " + std::to_string(gen_length) +
                                                    " exceeds the model's max_sequence_length " +
                                                    std::to_string(max_sequence_length));
}

std::map<std::string, std::string> GenerationConfig::to_map() const {
    auto num = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        return std::string(buf);
    };
    return {{"gen_length", std::to_string(gen_length)},
            {"block_length", std::to_string(block_length)},
            {"steps", std::to_string(steps)},
            {"temperature", num(temperature)},
            {"cfg_scale", num(cfg_scale)},
            {"remasking", to_string(remasking)},
            {"schedule", to_string(schedule)},
            {"top_p", num(top_p)},
            {"top_k", std::to_string(top_k)},
            {"alg_temp", num(alg_temp)},
            {"threshold", num(threshold)},
            {"factor", num(factor)},
            {"certainty_prior", certainty_prior ? "true" : "false"},
            {"certainty_sigma", num(certainty_sigma)},
            {"logits_eos_inf", logits_eos_inf ? "true" : "false"},
            {"confidence_eos_eot_inf", confidence_eos_eot_inf ? "true" : "false"},
            {"update_rule", to_string(update_rule)},
            {"fresh_prefix", fresh_prefix == kSystemTurn ? "system" : std::to_string(fresh_prefix)},
            {"seed", std::to_string(seed)}};
}

}  // namespace cl

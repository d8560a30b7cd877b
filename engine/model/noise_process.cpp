#include "engine/model/noise_process.h"

namespace cl {

const char* to_string(NoiseProcess p) {
    return p == NoiseProcess::Uniform ? "uniform" : "masked";
}

std::optional<NoiseProcess> parse_noise_process(const std::string& text) {
    if (text == "masked") return NoiseProcess::Masked;
    if (text == "uniform") return NoiseProcess::Uniform;
    return std::nullopt;
}

int32_t uniform_noise_token(uint64_t draw, int64_t vocab_size, int64_t mask_token_id) {
    const auto support = static_cast<uint64_t>(vocab_size - 1);
    auto id = static_cast<int64_t>(draw % support);
    if (id >= mask_token_id) ++id;  // skip [MASK]
    return static_cast<int32_t>(id);
}

}  // namespace cl

// The noise process a model was trained with, a property of the model (config.json
// "noise_process"; absent = masked). Masked: a response position starts as [MASK] and changes
// once (absorbing state). Uniform: it starts as a random vocabulary token and may change any
// number of times (GIDD with a uniform prior). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace cl {

enum class NoiseProcess { Masked, Uniform };

const char* to_string(NoiseProcess p);
// "masked" / "uniform"; nothing for any other text (the caller names the file or flag).
std::optional<NoiseProcess> parse_noise_process(const std::string& text);

// The uniform prior's support: every token id but [MASK] (which a uniform-noise model never sees
// or predicts). `draw` is any 64-bit random number; the result is uniform over the support.
// The trainer's corruption and the sampler's starting tokens both come from here.
int32_t uniform_noise_token(uint64_t draw, int64_t vocab_size, int64_t mask_token_id);

}  // namespace cl

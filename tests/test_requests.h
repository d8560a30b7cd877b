// The generation request the engine suites run on their tiny models: a short arithmetic prompt,
// G positions in blocks of B, T steps.
#pragma once

#include "engine/generation/generator.h"

namespace cl::test {

inline GenerationRequest request(int64_t G = 16, int64_t B = 8, int64_t T = 16) {
    GenerationRequest r;
    r.prompt_text = "What is 2 + 2?";
    r.config.gen_length = G;
    r.config.block_length = B;
    r.config.steps = T;
    return r;
}

}  // namespace cl::test

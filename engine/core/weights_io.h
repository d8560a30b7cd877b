// Torch <-> safetensors for LLaDA weights (internal: includes torch).
#pragma once

#include <filesystem>

#include "engine/core/llada_net.h"
#include "engine/core/model_writer.h"

namespace cl::detail {

// Fresh weights: normal(0, 0.02) for matrices, ones for norms (uses torch's global seed).
LladaWeights init_weights(const ModelConfig& config);
// Writes model.safetensors (shards == 1) or model-0000i-of-0000n.safetensors + index.
void save_weights(const std::filesystem::path& dir, LladaWeights& weights, StorageDType dtype,
                  int shards = 1);

}  // namespace cl::detail

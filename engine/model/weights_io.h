// Torch <-> safetensors for the weights of any architecture in the table, named by its weight
// slots (internal: includes torch).
#pragma once

#include <filesystem>

#include "engine/model/model_writer.h"
#include "engine/model/transformer_weights.h"

namespace cl::detail {

// Fresh weights: normal(0, 0.02) for matrices, ones for norms (uses torch's global seed).
// Biases (architectures with q/k/v biases) are drawn after every matrix, so a model without them
// draws the same weights as before biases existed.
TransformerWeights init_weights(const ModelConfig& config);
// Writes model.safetensors (shards == 1) or model-0000i-of-0000n.safetensors + index.
void save_weights(const std::filesystem::path& dir, const ModelConfig& config,
                  TransformerWeights& weights, StorageDType dtype, int shards = 1);
// The same layout with no weights: each shard is its safetensors header followed by a hole (a
// sparse file) as long as the tensors' data, so a full-size checkpoint costs kilobytes of disk and
// no time; for the checks that must not read weights. `dtype`: a safetensors name (BF16, F16,
// F32; I8 for a folder that must be refused).
// With random = true (BF16 only) the data is written instead of left as a hole: norm weights 1,
// every matrix uniform in +-sqrt(3 / fan_in) (unit-variance outputs), streamed tensor by tensor
// from a seeded counter hash, so a full-size model for speed work needs no memory beyond a buffer.
void write_sparse_weights(const std::filesystem::path& dir, const ModelConfig& config,
                          const std::string& dtype, int shards, bool random = false,
                          uint64_t seed = 0);

}  // namespace cl::detail

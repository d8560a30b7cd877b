// Writing HF-format model folders: config.json, model.safetensors, tokenizer.json,
// generation_config.json. Used by `init-model`, by training checkpoints and by tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/model/model_config.h"
#include "engine/tokenizer/bpe_trainer.h"

namespace cl {

enum class StorageDType { F32, F16, BF16 };
StorageDType parse_storage_dtype(const std::string& text);  // throws InputError

// Writes a randomly initialised model of config.architecture (normal(0, 0.02) projections, unit
// norms) with a byte-level tokenizer to `dir`. `config.vocab_size` is raised to fit the tokenizer
// if needed and mask/eos/bos ids are taken from it. Returns the config that was written.
ModelConfig init_random_model(const std::filesystem::path& dir, ModelConfig config, uint64_t seed,
                              StorageDType dtype = StorageDType::F32, int shards = 1);

// Makes `config` a model of the architecture table's entry `name` ("llada", "dream"): its name,
// its first model_type and the fields it fixes (q/k/v biases, logits shift). Throws InputError
// naming the known architectures.
void set_architecture(ModelConfig& config, const std::string& name);

// Convenience shape for tests: a tiny model in a few kilobytes.
ModelConfig tiny_config(int64_t d_model = 32, int64_t n_layers = 2, int64_t n_heads = 4,
                        int64_t n_kv_heads = 4);

}  // namespace cl

// A model folder checked without reading its weights: config.json through the architecture table,
// every safetensors header (and the shard index) against the tensors the config implies (names,
// shapes, dtypes, each exactly once). Model::load runs the same check before it reads a byte of
// weights; `inspect-model` runs only this, so a 16 GB checkpoint is validated in milliseconds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/model_config.h"

namespace cl {

struct TensorSummary {
    std::string name;
    std::vector<int64_t> shape;
    std::string stored_dtype;  // as in the file
    std::string file;          // shard it came from
};

struct ModelFolder {
    std::filesystem::path dir;
    ModelConfig config;
    std::vector<TensorSummary> tensors;  // the architecture's tensors, in file order
    std::vector<std::filesystem::path> weight_files;
    int64_t stored_bytes = 0;        // the architecture's tensors as stored (bf16: 2 per value)
    std::vector<std::string> notes;  // what was ignored: extra tensors, config keys for Python
    std::string end_of_turn;         // the architecture's end-of-turn token ("" = none)
};

// Throws InputError naming the file and the problem: config.json (missing, invalid, unknown
// architecture, bad field), the index or a shard (missing, corrupt header), a tensor with the
// wrong shape or a non-float dtype, one in two shards, one the config implies that is absent.
ModelFolder check_model_folder(const std::filesystem::path& dir);

// 16 hex digits over the bytes of the weight files (FNV-1a over 8-byte words: fast enough for
// multi-GB checkpoints, stable across runs). Reads every byte: seconds for a 16 GB folder.
std::string content_hash(const ModelFolder& folder);

}  // namespace cl

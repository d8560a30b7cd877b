// Which files of a model folder hold its weights: model.safetensors, or the shards that
// model.safetensors.index.json names. Torch-free: the index is untrusted input (a downloaded
// folder) and is fuzzed on its own (tests/fuzz/fuzz_weight_index.cpp).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace cl {

// The weight files of `dir`, each once, in name order. Throws InputError naming the index or the
// folder: invalid JSON, no weight_map object, an entry that is not a file name or points outside
// the folder, a listed shard that is missing, or neither file present.
std::vector<std::filesystem::path> find_weight_files(const std::filesystem::path& dir);

// The index's weight_map (tensor name -> shard file name); empty for a single-file folder.
// Throws InputError naming the index for the problems above.
std::map<std::string, std::string> read_weight_map(const std::filesystem::path& dir);

}  // namespace cl

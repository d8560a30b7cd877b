// Converting a model folder to another architecture, as the start of a training run (Dream was
// initialised from the autoregressive Qwen2.5 the same way): the tokenizer keeps every id and
// renames the special tokens to the target's names role by role, the weights are copied, key and
// value heads are mean-pooled in groups when the target has fewer (grouped-query attention, as in
// Ainslie et al. 2023) and q/k/v biases the target needs start at zero. Torch-free header.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/model/model_config.h"

namespace cl {

// Writes `to` (config.json, tokenizer.json, model.safetensors in float32) as a model of
// architecture `arch` converted from the folder `from`; n_kv_heads 0 keeps the source's. Throws
// InputError naming the folder or the setting when the conversion is impossible (an unknown
// architecture, key/value heads that do not divide the source's, biases the target cannot hold).
ModelConfig convert_model_folder(const std::filesystem::path& from, const std::filesystem::path& to,
                                 const std::string& arch, int64_t n_kv_heads = 0);

// tokenizer.json text with each special token of architecture `from_arch` renamed to the name
// `to_arch` gives the same role (bos, eos, mask, turn start, turn end), ids unchanged. Throws
// InputError naming `file` when a target name is already another token.
std::string rename_special_tokens(const std::string& tokenizer_json, const std::string& from_arch,
                                  const std::string& to_arch, const std::filesystem::path& file);

}  // namespace cl

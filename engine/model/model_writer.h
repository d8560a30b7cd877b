// Writing HF-format model folders: config.json, model.safetensors, tokenizer.json,
// generation_config.json. Used by `init-model`, by training checkpoints and by tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/model/model_config.h"

namespace cl {

enum class StorageDType { F32, F16, BF16 };
StorageDType parse_storage_dtype(const std::string& text);  // throws InputError

// The special tokens every CacheLens tokenizer carries (LLaDA names).
struct SpecialTokens {
    static constexpr const char* kBos = "<|startoftext|>";
    static constexpr const char* kEos = "<|endoftext|>";
    static constexpr const char* kMask = "<|mdm_mask|>";
    static constexpr const char* kStartHeader = "<|start_header_id|>";
    static constexpr const char* kEndHeader = "<|end_header_id|>";
    static constexpr const char* kEot = "<|eot_id|>";
};

// A byte-level BPE tokenizer.json with the 256 byte symbols, the given merges ("a b" in the
// byte-level alphabet, in rank order) and the special tokens appended after the merged vocab.
// With `split_digits`, every digit is its own pre-token (numbers never merge), which makes
// arithmetic learnable for small models.
std::string make_byte_level_tokenizer_json(const std::vector<std::string>& merges = {},
                                           bool split_digits = false);

// Trains byte-level BPE merges on `texts` until the vocabulary (bytes + merges) reaches
// `vocab_size` - 6 (the special tokens come after). Returns the tokenizer.json text.
std::string train_byte_level_bpe(const std::vector<std::string>& texts, int vocab_size,
                                 bool split_digits = true);

// Writes a randomly initialised LLaDA model (normal(0, 0.02) projections, unit norms) with a
// byte-level tokenizer to `dir`. `config.vocab_size` is raised to fit the tokenizer if needed and
// mask/eos/bos ids are taken from it. Returns the config that was written.
ModelConfig init_random_model(const std::filesystem::path& dir, ModelConfig config, uint64_t seed,
                              StorageDType dtype = StorageDType::F32, int shards = 1);

// Convenience shape for tests: a tiny model in a few kilobytes.
ModelConfig tiny_config(int64_t d_model = 32, int64_t n_layers = 2, int64_t n_heads = 4,
                        int64_t n_kv_heads = 4);

}  // namespace cl

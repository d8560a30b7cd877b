// Byte-level BPE tokenizers in Hugging Face's tokenizer.json format: the special tokens of
// CacheLens models, an untrained tokenizer (bytes only) and BPE training. Torch-free.
#pragma once

#include <string>
#include <vector>

namespace cl {

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

}  // namespace cl

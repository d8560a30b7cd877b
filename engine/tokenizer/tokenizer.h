// Tokenizer: Hugging Face tokenizer.json (BPE, Unigram or WordPiece) with added/special tokens,
// the normalizer, pre-tokenizer, decoder and post-processor the file declares.
//
// Encoding follows the `tokenizers` library: split on added tokens (leftmost-longest), normalize,
// pre-tokenize (regex splits use PCRE2 with Unicode properties), then the model splits each piece
// (BPE merges by rank, Unigram's Viterbi, WordPiece's greedy longest match). Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cl {

struct AddedToken {
    int32_t id = 0;
    std::string content;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
};

class Tokenizer {
public:
    // Throws InputError naming the file and the problem.
    static std::unique_ptr<Tokenizer> load(const std::filesystem::path& tokenizer_json);
    static std::unique_ptr<Tokenizer> from_json_text(const std::string& text,
                                                     const std::string& source_name);
    ~Tokenizer();

    // Throws InputError if `text` is not valid UTF-8. `add_special_tokens` applies the file's
    // post-processor (a BOS, [CLS] ... [SEP]) as Hugging Face's encode does by default; CacheLens
    // leaves it off for prompts, whose chat template writes the special tokens itself (as
    // LLaDA's and Dream's reference scripts encode them).
    std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
    std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
    // Normalizer + pre-tokenizer only (no added-token split): the pieces BPE would see.
    std::vector<std::string> pre_tokenize(std::string_view text) const;
    // Display text of one token (byte-level decoded; may be a partial UTF-8 sequence, then
    // replaced by U+FFFD).
    std::string token_text(int32_t id) const;
    std::optional<int32_t> token_to_id(const std::string& token) const;
    // The id of a token the caller cannot do without (the mask, EOS); throws InputError naming
    // the tokenizer's file and the token when it is missing.
    int32_t required_token_id(const std::string& token) const;
    int32_t vocab_size() const;  // max id + 1 over the vocabulary and added tokens
    bool is_special(int32_t id) const;
    const std::vector<AddedToken>& added_tokens() const;

private:
    Tokenizer();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

bool is_valid_utf8(std::string_view text);
// Replaces invalid sequences by U+FFFD, so any token text can be displayed.
std::string sanitize_utf8(std::string_view text);

// The GPT-2 byte <-> printable-unicode map used by byte-level BPE.
const std::vector<std::string>& byte_level_alphabet();  // 256 entries, UTF-8 encoded

}  // namespace cl

// The parts of a Hugging Face tokenizer pipeline, one file each: UTF-8 and byte-level text
// helpers (utf8_text.cpp), PCRE2 regex splitting (regex_split.cpp), normalisers
// (normalizer.cpp), pre-tokenisers (pre_tokenizer.cpp) and decoders (decoder.cpp); the BPE
// model and the Tokenizer that assembles them are in tokenizer.cpp. Internal to cl_tokenizer.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/base/errors.h"

namespace cl::detail {

using json = nlohmann::json;

// ---- UTF-8 and byte-level text (utf8_text.cpp)
// Length of the valid UTF-8 sequence at s[i], or 0 if invalid.
size_t utf8_sequence_length(std::string_view s, size_t i);
std::string encode_codepoint(uint32_t cp);
// UTF-8 characters of s (an invalid byte is a character of its own).
std::vector<std::string> split_chars(std::string_view s);
bool is_space_char(char c);
std::string to_byte_level(const std::string& s);
std::string from_byte_level(const std::string& s);

// ---- Regex splitting (regex_split.cpp)
class Regex {
public:
    Regex(const std::string& pattern, const std::string& source) {
        int err = 0;
        PCRE2_SIZE offset = 0;
        m_code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                               PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
        if (!m_code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            throw InputError(source, "invalid split regex '" + pattern +
                                         "': " + reinterpret_cast<const char*>(msg));
        }
        pcre2_jit_compile(m_code,
                          PCRE2_JIT_COMPLETE);  // best effort; falls back to the interpreter
    }
    ~Regex() { pcre2_code_free(m_code); }
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Non-overlapping matches as [begin, end) byte ranges.
    std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const {
        std::vector<std::pair<size_t, size_t>> out;
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(m_code, nullptr);
        size_t pos = 0;
        while (pos <= text.size()) {
            const int rc = pcre2_match(m_code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                                       text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
            if (rc < 0) break;
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
            const size_t b = ov[0], e = ov[1];
            if (e == b) {  // empty match: skip one character
                if (b >= text.size()) break;
                size_t n = utf8_sequence_length(text, b);
                pos = b + (n ? n : 1);
                continue;
            }
            out.emplace_back(b, e);
            pos = e;
        }
        pcre2_match_data_free(md);
        return out;
    }

private:
    pcre2_code* m_code = nullptr;
};

std::string regex_escape(const std::string& s);
std::shared_ptr<Regex> compile_pattern(const json& pattern, const std::string& source);
extern const char* const kGpt2Pattern;
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
// Pieces of `text` around the regex's matches (`invert`: the matches are the pieces to keep).
std::vector<std::string> split_with(const Regex& re, const std::string& text,
                                    SplitBehavior behavior, bool invert);
SplitBehavior parse_behavior(const std::string& b, const std::string& src);

// Metaspace's settings, shared by its pre-tokenizer and its decoder (pre_tokenizer.cpp): the
// replacement character and the prepend scheme (always, first or never; older files' boolean
// add_prefix_space means always or never).
struct MetaspaceOptions {
    std::string replacement;
    std::string scheme;
};
MetaspaceOptions read_metaspace(const json& j, const std::string& src);

// ---- Subword models: a vocabulary and how one pre-tokenized piece becomes ids (one file each:
// bpe_model.cpp, unigram_model.cpp, wordpiece_model.cpp; make_model in tokenizer.cpp)
struct Vocabulary {
    std::unordered_map<std::string, int32_t> ids;
    std::vector<std::string> tokens;  // by id; "" where no token has that id
    // Adds every entry; InputError naming `src` on an id outside [0, 50M).
    void add(const std::string& token, int64_t id, const std::string& src);
    // Adds a model's {"token": id} vocab object (BPE, WordPiece); InputError naming `src` and
    // `model_type` when it is missing or an id is not an integer.
    void add_object(const json& model, const char* model_type, const std::string& src);
    std::optional<int32_t> find(const std::string& token) const {
        auto it = ids.find(token);
        return it == ids.end() ? std::nullopt : std::optional<int32_t>(it->second);
    }
};

class SubwordModel {
public:
    virtual ~SubwordModel() = default;
    virtual std::vector<int32_t> tokenize(const std::string& piece) const = 0;
    const Vocabulary& vocabulary() const { return m_vocab; }

protected:
    Vocabulary m_vocab;
};

std::unique_ptr<SubwordModel> make_bpe_model(const json& model, const std::string& src);
std::unique_ptr<SubwordModel> make_unigram_model(const json& model, const std::string& src);
std::unique_ptr<SubwordModel> make_wordpiece_model(const json& model, const std::string& src);

// SentencePiece's byte fallback: the ids of the "<0xAB>" tokens of `text`'s bytes, appended to
// `out`; false (and `out` unchanged) when the vocabulary lacks one of them.
bool append_byte_tokens(const Vocabulary& vocab, const std::string& text,
                        std::vector<int32_t>& out);

// ---- The pipeline's stages, built from tokenizer.json (InputError names `src` when unsupported)
using Normalizer = std::function<std::string(std::string)>;
using PreTokenizer = std::function<std::vector<std::string>(std::vector<std::string>)>;
using Decoder = std::function<std::vector<std::string>(std::vector<std::string>)>;
Normalizer make_normalizer(const json& j, const std::string& src);  // normalizer.cpp
// `input_start`: the pre-tokenizer for the segment at the start of the input (Metaspace's
// prepend_scheme "first" prepends there only; segments after an added token get false).
PreTokenizer make_pre_tokenizer(const json& j, const std::string& src,
                                bool input_start = true);     // pre_tokenizer.cpp
Decoder make_decoder(const json& j, const std::string& src);  // decoder.cpp
// Adds the special tokens a post-processor declares around one encoded sequence (Template, Bert,
// Roberta, ByteLevel, Sequence). Single sequences only: pair templates are not read.
using PostProcessor = std::function<std::vector<int32_t>(std::vector<int32_t>)>;
PostProcessor make_post_processor(const json& j, const std::string& src);  // post_processor.cpp

}  // namespace cl::detail

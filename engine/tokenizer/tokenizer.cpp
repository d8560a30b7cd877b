#include "engine/tokenizer/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicase.h>
#include <uninorm.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "engine/base/errors.h"

namespace cl {

using json = nlohmann::json;

// ---- UTF-8 helpers ------------------------------------------------------------------------------

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if invalid.
size_t utf8_sequence_length(std::string_view s, size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) {
        n = 2;
        cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3;
        cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4;
        cp = c & 0x07;
    } else
        return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        const auto cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (cc & 0x3f);
    }
    // Reject overlong encodings, surrogates and code points above U+10FFFF.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000)) return 0;
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return 0;
    return n;
}

std::string encode_codepoint(uint32_t cp) {
    std::string out;
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
        out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
    return out;
}

std::vector<std::string> split_chars(std::string_view s) {
    std::vector<std::string> chars;
    for (size_t i = 0; i < s.size();) {
        size_t n = utf8_sequence_length(s, i);
        if (n == 0) n = 1;
        chars.emplace_back(s.substr(i, n));
        i += n;
    }
    return chars;
}

bool is_space_char(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
        const size_t n = utf8_sequence_length(text, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string sanitize_utf8(std::string_view text) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
        const size_t n = utf8_sequence_length(text, i);
        if (n == 0) {
            out += "\xef\xbf\xbd";
            ++i;
        } else {
            out.append(text.substr(i, n));
            i += n;
        }
    }
    return out;
}

const std::vector<std::string>& byte_level_alphabet() {
    static const std::vector<std::string> alphabet = [] {
        std::vector<uint32_t> cps(256, 0);
        std::vector<bool> direct(256, false);
        for (int b = '!'; b <= '~'; ++b) direct[b] = true;
        for (int b = 0xa1; b <= 0xac; ++b) direct[b] = true;
        for (int b = 0xae; b <= 0xff; ++b) direct[b] = true;
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) cps[b] = direct[b] ? static_cast<uint32_t>(b) : next++;
        std::vector<std::string> out(256);
        for (int b = 0; b < 256; ++b) out[b] = encode_codepoint(cps[b]);
        return out;
    }();
    return alphabet;
}

// ---- Regex (PCRE2 with Unicode properties) -----------------------------------------------------

namespace {

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

std::string regex_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos)
            out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

// A pattern is either {"String": "..."} (literal) or {"Regex": "..."}.
std::shared_ptr<Regex> compile_pattern(const json& pattern, const std::string& source) {
    if (pattern.contains("Regex"))
        return std::make_shared<Regex>(pattern["Regex"].get<std::string>(), source);
    if (pattern.contains("String"))
        return std::make_shared<Regex>(regex_escape(pattern["String"].get<std::string>()), source);
    throw InputError(source, "split pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

std::vector<std::string> split_with(const Regex& re, const std::string& text,
                                    SplitBehavior behavior, bool invert) {
    // Segments covering the text: (begin, end, is_match).
    struct Seg {
        size_t b, e;
        bool match;
    };
    std::vector<Seg> segs;
    size_t last = 0;
    for (auto [b, e] : re.find_all(text)) {
        if (b > last) segs.push_back({last, b, false});
        segs.push_back({b, e, true});
        last = e;
    }
    if (last < text.size()) segs.push_back({last, text.size(), false});
    if (invert)
        for (auto& s : segs) s.match = !s.match;
    std::vector<std::string> out;
    auto piece = [&](const Seg& s) { return text.substr(s.b, s.e - s.b); };
    switch (behavior) {
        case SplitBehavior::Removed:
            for (const auto& s : segs)
                if (!s.match) out.push_back(piece(s));
            break;
        case SplitBehavior::Isolated:
            for (const auto& s : segs) out.push_back(piece(s));
            break;
        case SplitBehavior::MergedWithPrevious:
            for (const auto& s : segs) {
                if (s.match && !out.empty())
                    out.back() += piece(s);
                else
                    out.push_back(piece(s));
            }
            break;
        case SplitBehavior::MergedWithNext: {
            std::string pending;
            for (const auto& s : segs) {
                if (s.match) {
                    pending += piece(s);
                } else {
                    out.push_back(pending + piece(s));
                    pending.clear();
                }
            }
            if (!pending.empty()) out.push_back(pending);
            break;
        }
        case SplitBehavior::Contiguous: {
            bool prev_match = false;
            for (const auto& s : segs) {
                if (s.match && prev_match && !out.empty())
                    out.back() += piece(s);
                else
                    out.push_back(piece(s));
                prev_match = s.match;
            }
            break;
        }
    }
    out.erase(
        std::remove_if(out.begin(), out.end(), [](const std::string& p) { return p.empty(); }),
        out.end());
    return out;
}

using Normalizer = std::function<std::string(std::string)>;
using PreTokenizer = std::function<std::vector<std::string>(std::vector<std::string>)>;
using Decoder = std::function<std::vector<std::string>(std::vector<std::string>)>;

std::string unicode_normalize(const std::string& s, uninorm_t form) {
    size_t len = 0;
    uint8_t* r =
        u8_normalize(form, reinterpret_cast<const uint8_t*>(s.data()), s.size(), nullptr, &len);
    if (!r) return s;
    std::string out(reinterpret_cast<char*>(r), len);
    free(r);
    return out;
}

Normalizer make_normalizer(const json& j, const std::string& src) {
    if (j.is_null()) return nullptr;
    const auto type = j.value("type", std::string());
    if (type == "Sequence") {
        std::vector<Normalizer> parts;
        for (const auto& n : j.at("normalizers")) parts.push_back(make_normalizer(n, src));
        return [parts](std::string s) {
            for (const auto& p : parts)
                if (p) s = p(std::move(s));
            return s;
        };
    }
    if (type == "NFC") return [](std::string s) { return unicode_normalize(s, UNINORM_NFC); };
    if (type == "NFD") return [](std::string s) { return unicode_normalize(s, UNINORM_NFD); };
    if (type == "NFKC") return [](std::string s) { return unicode_normalize(s, UNINORM_NFKC); };
    if (type == "NFKD") return [](std::string s) { return unicode_normalize(s, UNINORM_NFKD); };
    if (type == "Lowercase")
        return [](std::string s) {
            size_t len = 0;
            uint8_t* r = u8_tolower(reinterpret_cast<const uint8_t*>(s.data()), s.size(), nullptr,
                                    nullptr, nullptr, &len);
            if (!r) return s;
            std::string out(reinterpret_cast<char*>(r), len);
            free(r);
            return out;
        };
    if (type == "Prepend") {
        const auto prefix = j.at("prepend").get<std::string>();
        return [prefix](std::string s) { return s.empty() ? s : prefix + s; };
    }
    if (type == "Replace") {
        auto re = compile_pattern(j.at("pattern"), src);
        const auto content = j.at("content").get<std::string>();
        return [re, content](std::string s) {
            std::string out;
            size_t last = 0;
            for (auto [b, e] : re->find_all(s)) {
                out += s.substr(last, b - last) + content;
                last = e;
            }
            return out + s.substr(last);
        };
    }
    if (type == "Strip") {
        const bool left = j.value("strip_left", true), right = j.value("strip_right", true);
        return [left, right](std::string s) {
            size_t b = 0, e = s.size();
            if (left)
                while (b < e && is_space_char(s[b])) ++b;
            if (right)
                while (e > b && is_space_char(s[e - 1])) --e;
            return s.substr(b, e - b);
        };
    }
    throw InputError(src, "normalizer type '" + type + "' is not supported");
}

SplitBehavior parse_behavior(const std::string& b, const std::string& src) {
    if (b == "Removed") return SplitBehavior::Removed;
    if (b == "Isolated") return SplitBehavior::Isolated;
    if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
    if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
    if (b == "Contiguous") return SplitBehavior::Contiguous;
    throw InputError(src, "split behavior '" + b + "' is not supported");
}

std::string to_byte_level(const std::string& s) {
    const auto& alphabet = byte_level_alphabet();
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) out += alphabet[c];
    return out;
}

PreTokenizer make_pre_tokenizer(const json& j, const std::string& src) {
    if (j.is_null()) return nullptr;
    const auto type = j.value("type", std::string());
    if (type == "Sequence") {
        std::vector<PreTokenizer> parts;
        for (const auto& p : j.at("pretokenizers")) parts.push_back(make_pre_tokenizer(p, src));
        return [parts](std::vector<std::string> pieces) {
            for (const auto& p : parts)
                if (p) pieces = p(std::move(pieces));
            return pieces;
        };
    }
    if (type == "ByteLevel") {
        const bool add_prefix_space = j.value("add_prefix_space", false);
        const bool use_regex = j.value("use_regex", true);
        auto re = std::make_shared<Regex>(kGpt2Pattern, src);
        return [=](std::vector<std::string> pieces) {
            std::vector<std::string> out;
            for (auto& p : pieces) {
                if (add_prefix_space && !p.empty() && p[0] != ' ') p = " " + p;
                std::vector<std::string> parts =
                    use_regex ? split_with(*re, p, SplitBehavior::Isolated, false)
                              : std::vector<std::string>{p};
                for (auto& part : parts) out.push_back(to_byte_level(part));
            }
            return out;
        };
    }
    if (type == "Split") {
        auto re = compile_pattern(j.at("pattern"), src);
        const auto behavior = parse_behavior(j.value("behavior", std::string("Isolated")), src);
        const bool invert = j.value("invert", false);
        return [=](std::vector<std::string> pieces) {
            std::vector<std::string> out;
            for (const auto& p : pieces)
                for (auto& s : split_with(*re, p, behavior, invert)) out.push_back(std::move(s));
            return out;
        };
    }
    if (type == "Digits") {
        const bool individual = j.value("individual_digits", false);
        auto re = std::make_shared<Regex>(individual ? "\\p{N}" : "\\p{N}+", src);
        return [=](std::vector<std::string> pieces) {
            std::vector<std::string> out;
            for (const auto& p : pieces)
                for (auto& s : split_with(*re, p, SplitBehavior::Isolated, false))
                    out.push_back(std::move(s));
            return out;
        };
    }
    if (type == "WhitespaceSplit") {
        auto re = std::make_shared<Regex>("\\s+", src);
        return [=](std::vector<std::string> pieces) {
            std::vector<std::string> out;
            for (const auto& p : pieces)
                for (auto& s : split_with(*re, p, SplitBehavior::Removed, false))
                    out.push_back(std::move(s));
            return out;
        };
    }
    throw InputError(src, "pre_tokenizer type '" + type + "' is not supported");
}

std::string from_byte_level(const std::string& s) {
    static const std::unordered_map<std::string, char> inverse = [] {
        std::unordered_map<std::string, char> m;
        const auto& a = byte_level_alphabet();
        for (int b = 0; b < 256; ++b) m[a[b]] = static_cast<char>(b);
        return m;
    }();
    std::string out;
    for (const auto& ch : split_chars(s)) {
        auto it = inverse.find(ch);
        if (it != inverse.end())
            out.push_back(it->second);
        else
            out += ch;
    }
    return out;
}

Decoder make_decoder(const json& j, const std::string& src) {
    if (j.is_null()) return nullptr;
    const auto type = j.value("type", std::string());
    if (type == "Sequence") {
        std::vector<Decoder> parts;
        for (const auto& d : j.at("decoders")) parts.push_back(make_decoder(d, src));
        return [parts](std::vector<std::string> toks) {
            for (const auto& p : parts)
                if (p) toks = p(std::move(toks));
            return toks;
        };
    }
    if (type == "ByteLevel")
        return [](std::vector<std::string> toks) {
            std::string joined;
            for (const auto& t : toks) joined += t;
            return std::vector<std::string>{from_byte_level(joined)};
        };
    if (type == "Fuse")
        return [](std::vector<std::string> toks) {
            std::string joined;
            for (const auto& t : toks) joined += t;
            return std::vector<std::string>{joined};
        };
    if (type == "Replace") {
        auto re = compile_pattern(j.at("pattern"), src);
        const auto content = j.at("content").get<std::string>();
        return [re, content](std::vector<std::string> toks) {
            for (auto& s : toks) {
                std::string out;
                size_t last = 0;
                for (auto [b, e] : re->find_all(s)) {
                    out += s.substr(last, b - last) + content;
                    last = e;
                }
                s = out + s.substr(last);
            }
            return toks;
        };
    }
    if (type == "Strip") {
        const auto content = j.at("content").get<std::string>();
        const size_t start = j.value("start", 0), stop = j.value("stop", 0);
        return [=](std::vector<std::string> toks) {
            for (auto& s : toks) {
                size_t b = 0, e = s.size(), n = 0;
                while (n < start && s.compare(b, content.size(), content) == 0) {
                    b += content.size();
                    ++n;
                }
                n = 0;
                while (n < stop && e >= b + content.size() &&
                       s.compare(e - content.size(), content.size(), content) == 0) {
                    e -= content.size();
                    ++n;
                }
                s = s.substr(b, e - b);
            }
            return toks;
        };
    }
    throw InputError(src, "decoder type '" + type + "' is not supported");
}

}  // namespace

// ---- Tokenizer ---------------------------------------------------------------------------------

struct Tokenizer::Impl {
    std::string source;
    std::unordered_map<std::string, int32_t> vocab;
    std::vector<std::string> id_to_token;
    struct Merge {
        int32_t rank;
        int32_t merged;
    };
    std::unordered_map<uint64_t, Merge> merges;  // key = (left id << 32) | right id
    std::vector<AddedToken> added;
    std::unordered_map<int32_t, size_t> added_by_id;
    std::map<unsigned char, std::vector<size_t>> added_by_first_byte;  // longest first
    std::optional<int32_t> unk_id;
    bool byte_fallback = false;
    bool ignore_merges = false;
    Normalizer normalizer;
    PreTokenizer pre_tokenizer;
    Decoder decoder;
    mutable std::mutex cache_mutex;
    mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

    static uint64_t key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }

    std::vector<int32_t> bpe(const std::string& word) const {
        {
            std::lock_guard lock(cache_mutex);
            auto it = cache.find(word);
            if (it != cache.end()) return it->second;
        }
        std::vector<int32_t> ids;
        auto direct = vocab.find(word);
        if (ignore_merges && direct != vocab.end()) {
            ids.push_back(direct->second);
        } else {
            for (const auto& ch : split_chars(word)) {
                auto it = vocab.find(ch);
                if (it != vocab.end()) {
                    ids.push_back(it->second);
                    continue;
                }
                if (byte_fallback) {
                    bool ok = true;
                    std::vector<int32_t> bytes;
                    for (unsigned char c : ch) {
                        char buf[8];
                        std::snprintf(buf, sizeof buf, "<0x%02X>", c);
                        auto b = vocab.find(buf);
                        if (b == vocab.end()) {
                            ok = false;
                            break;
                        }
                        bytes.push_back(b->second);
                    }
                    if (ok) {
                        ids.insert(ids.end(), bytes.begin(), bytes.end());
                        continue;
                    }
                }
                if (unk_id) ids.push_back(*unk_id);
                // Without unk or byte fallback the character is dropped, as the reference does.
            }
            // Repeatedly merge the lowest-ranked adjacent pair (leftmost on ties).
            while (ids.size() > 1) {
                int32_t best_rank = INT32_MAX, best_merged = -1;
                size_t best_pos = 0;
                for (size_t i = 0; i + 1 < ids.size(); ++i) {
                    auto it = merges.find(key(ids[i], ids[i + 1]));
                    if (it != merges.end() && it->second.rank < best_rank) {
                        best_rank = it->second.rank;
                        best_merged = it->second.merged;
                        best_pos = i;
                    }
                }
                if (best_merged < 0) break;
                ids[best_pos] = best_merged;
                ids.erase(ids.begin() + static_cast<long>(best_pos) + 1);
            }
        }
        std::lock_guard lock(cache_mutex);
        if (cache.size() > 100000) cache.clear();
        cache.emplace(word, ids);
        return ids;
    }

    void encode_segment(const std::string& text, std::vector<int32_t>& out) const {
        if (text.empty()) return;
        std::string normalized = normalizer ? normalizer(text) : text;
        std::vector<std::string> pieces{normalized};
        if (pre_tokenizer) pieces = pre_tokenizer(std::move(pieces));
        for (const auto& p : pieces) {
            auto ids = bpe(p);
            out.insert(out.end(), ids.begin(), ids.end());
        }
    }
};

Tokenizer::Tokenizer() : m_impl(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "cannot open tokenizer file");
    std::stringstream buffer;
    buffer << in.rdbuf();
    return from_json_text(buffer.str(), path.string());
}

std::unique_ptr<Tokenizer> Tokenizer::from_json_text(const std::string& text,
                                                     const std::string& src) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::parse_error& e) {
        throw InputError(src, std::string("invalid JSON: ") + e.what());
    }
    std::unique_ptr<Tokenizer> tok(new Tokenizer());
    Impl& m = *tok->m_impl;
    m.source = src;
    try {
        if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
            throw InputError(src, "no 'model' section");
        const auto& model = j["model"];
        const auto type = model.value("type", std::string("BPE"));
        if (type != "BPE")
            throw InputError(src, "model type '" + type + "' is not supported (expected BPE)");
        if (!model.contains("vocab") || !model["vocab"].is_object())
            throw InputError(src, "BPE model has no vocab object");
        int32_t max_id = -1;
        for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
            if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
                it->get<int64_t>() > 50'000'000)
                throw InputError(src,
                                 "vocab entry '" + sanitize_utf8(it.key()) + "' has an invalid id");
            const auto id = it->get<int32_t>();
            m.vocab[it.key()] = id;
            max_id = std::max(max_id, id);
        }
        m.id_to_token.assign(static_cast<size_t>(max_id + 1), std::string());
        for (const auto& [t, id] : m.vocab) m.id_to_token[static_cast<size_t>(id)] = t;
        int32_t rank = 0;
        if (model.contains("merges")) {
            for (const auto& mj : model["merges"]) {
                std::string a, b;
                if (mj.is_string()) {
                    const auto s = mj.get<std::string>();
                    const auto sp = s.find(' ');
                    if (sp == std::string::npos)
                        throw InputError(src, "merge '" + s + "' has no space");
                    a = s.substr(0, sp);
                    b = s.substr(sp + 1);
                } else if (mj.is_array() && mj.size() == 2) {
                    a = mj[0].get<std::string>();
                    b = mj[1].get<std::string>();
                } else {
                    throw InputError(src, "merge entry is neither \"a b\" nor [a, b]");
                }
                auto ia = m.vocab.find(a), ib = m.vocab.find(b), im = m.vocab.find(a + b);
                if (ia == m.vocab.end() || ib == m.vocab.end() || im == m.vocab.end())
                    throw InputError(src, "merge '" + sanitize_utf8(a) + " " + sanitize_utf8(b) +
                                              "' refers to tokens missing from the vocab");
                m.merges.emplace(Impl::key(ia->second, ib->second),
                                 Impl::Merge{rank++, im->second});
            }
        }
        if (model.contains("unk_token") && model["unk_token"].is_string()) {
            auto it = m.vocab.find(model["unk_token"].get<std::string>());
            if (it != m.vocab.end()) m.unk_id = it->second;
        }
        m.byte_fallback = model.value("byte_fallback", false);
        m.ignore_merges = model.value("ignore_merges", false);
        if (model.contains("continuing_subword_prefix") &&
            !model["continuing_subword_prefix"].is_null() &&
            !model["continuing_subword_prefix"].get<std::string>().empty())
            throw InputError(src, "continuing_subword_prefix is not supported");

        if (j.contains("added_tokens")) {
            for (const auto& a : j["added_tokens"]) {
                AddedToken t;
                t.id = a.at("id").get<int32_t>();
                t.content = a.at("content").get<std::string>();
                t.special = a.value("special", false);
                t.lstrip = a.value("lstrip", false);
                t.rstrip = a.value("rstrip", false);
                if (t.content.empty()) throw InputError(src, "an added token has empty content");
                if (t.id < 0)
                    throw InputError(src, "added token '" + t.content + "' has a negative id");
                m.added_by_id[t.id] = m.added.size();
                m.added.push_back(t);
            }
        }
        for (size_t i = 0; i < m.added.size(); ++i)
            m.added_by_first_byte[static_cast<unsigned char>(m.added[i].content[0])].push_back(i);
        for (auto& [c, list] : m.added_by_first_byte)
            std::sort(list.begin(), list.end(), [&](size_t a, size_t b) {
                return m.added[a].content.size() > m.added[b].content.size();
            });

        m.normalizer = make_normalizer(j.value("normalizer", json()), src);
        m.pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", json()), src);
        m.decoder = make_decoder(j.value("decoder", json()), src);
    } catch (const json::exception& e) {
        throw InputError(src, std::string("malformed tokenizer: ") + e.what());
    }
    return tok;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
    if (!is_valid_utf8(text)) throw InputError("prompt is not valid UTF-8");
    const Impl& m = *m_impl;
    std::vector<int32_t> out;
    std::string pending;
    size_t i = 0;
    while (i < text.size()) {
        const AddedToken* hit = nullptr;
        auto it = m.added_by_first_byte.find(static_cast<unsigned char>(text[i]));
        if (it != m.added_by_first_byte.end()) {
            for (size_t idx : it->second) {
                const auto& t = m.added[idx];
                if (text.compare(i, t.content.size(), t.content) == 0) {
                    hit = &t;
                    break;
                }
            }
        }
        if (!hit) {
            pending.push_back(text[i]);
            ++i;
            continue;
        }
        if (hit->lstrip)
            while (!pending.empty() && is_space_char(pending.back())) pending.pop_back();
        m.encode_segment(pending, out);
        pending.clear();
        out.push_back(hit->id);
        i += hit->content.size();
        if (hit->rstrip)
            while (i < text.size() && is_space_char(text[i])) ++i;
    }
    m.encode_segment(pending, out);
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    const Impl& m = *m_impl;
    std::string out;
    std::vector<std::string> run;
    auto flush = [&] {
        if (run.empty()) return;
        auto parts = m.decoder ? m.decoder(run) : run;
        for (const auto& p : parts) out += p;
        run.clear();
    };
    for (int32_t id : ids) {
        auto a = m.added_by_id.find(id);
        if (a != m.added_by_id.end()) {
            flush();
            const auto& t = m.added[a->second];
            if (!(skip_special && t.special)) out += t.content;
            continue;
        }
        if (id >= 0 && static_cast<size_t>(id) < m.id_to_token.size() && !m.id_to_token[id].empty())
            run.push_back(m.id_to_token[static_cast<size_t>(id)]);
    }
    flush();
    return out;
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
    const Impl& m = *m_impl;
    std::string normalized = m.normalizer ? m.normalizer(std::string(text)) : std::string(text);
    std::vector<std::string> pieces{normalized};
    if (m.pre_tokenizer) pieces = m.pre_tokenizer(std::move(pieces));
    return pieces;
}

std::string Tokenizer::token_text(int32_t id) const {
    return sanitize_utf8(decode({id}));
}

std::optional<int32_t> Tokenizer::token_to_id(const std::string& token) const {
    for (const auto& t : m_impl->added)
        if (t.content == token) return t.id;
    auto it = m_impl->vocab.find(token);
    if (it != m_impl->vocab.end()) return it->second;
    return std::nullopt;
}

int32_t Tokenizer::vocab_size() const {
    int32_t n = static_cast<int32_t>(m_impl->id_to_token.size());
    for (const auto& t : m_impl->added) n = std::max(n, t.id + 1);
    return n;
}

bool Tokenizer::is_special(int32_t id) const {
    auto a = m_impl->added_by_id.find(id);
    return a != m_impl->added_by_id.end() && m_impl->added[a->second].special;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
    return m_impl->added;
}

bool Tokenizer::has_chat_tokens() const {
    return token_to_id("<|start_header_id|>") && token_to_id("<|end_header_id|>") &&
           token_to_id("<|eot_id|>");
}

}  // namespace cl

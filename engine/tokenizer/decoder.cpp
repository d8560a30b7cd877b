#include "engine/tokenizer/tokenizer_parts.h"

#include <algorithm>

#include "engine/base/json_int.h"
#include "engine/tokenizer/tokenizer.h"

namespace cl::detail {
namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The byte of a SentencePiece byte token "<0xAB>", or -1 for any other token.
int byte_token_value(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Hugging Face's ByteFallback: each run of byte tokens becomes its text when the bytes are valid
// UTF-8, else one U+FFFD per byte token; other tokens pass unchanged.
std::vector<std::string> fuse_byte_tokens(const std::vector<std::string>& toks) {
    std::vector<std::string> out;
    std::string bytes;
    size_t count = 0;
    auto flush = [&] {
        if (count == 0) return;
        if (is_valid_utf8(bytes))
            out.push_back(bytes);
        else
            out.insert(out.end(), count, std::string("\xEF\xBF\xBD"));
        bytes.clear();
        count = 0;
    };
    for (const auto& t : toks) {
        const int b = byte_token_value(t);
        if (b < 0) {
            flush();
            out.push_back(t);
            continue;
        }
        bytes.push_back(static_cast<char>(b));
        ++count;
    }
    flush();
    return out;
}

// Hugging Face's Metaspace decoder: the replacement character becomes a space, except in the
// first token, where it is dropped when the pre-tokenizer prepends one (scheme not "never").
Decoder metaspace_decoder(const json& j, const std::string& src) {
    const MetaspaceOptions options = read_metaspace(j, src);
    const std::string replacement = options.replacement, scheme = options.scheme;
    return [replacement, scheme](std::vector<std::string> toks) {
        for (size_t i = 0; i < toks.size(); ++i) {
            const std::string with = i == 0 && scheme != "never" ? "" : " ";
            std::string out;
            size_t last = 0;
            for (size_t at = toks[i].find(replacement); at != std::string::npos;
                 at = toks[i].find(replacement, last)) {
                out.append(toks[i], last, at - last).append(with);
                last = at + replacement.size();
            }
            toks[i] = out.append(toks[i], last, std::string::npos);
        }
        return toks;
    };
}

// BERT's detokenisation cleanup, as the reference applies it to each token.
std::string wordpiece_cleanup(std::string s) {
    static const std::pair<const char*, const char*> kRules[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : kRules) {
        const std::string f = from, t = to;
        for (size_t at = s.find(f); at != std::string::npos; at = s.find(f, at + t.size()))
            s.replace(at, f.size(), t);
    }
    return s;
}

// WordPiece: a token after the first loses its continuing-subword prefix or gains a space.
Decoder wordpiece_decoder(const json& j) {
    const auto prefix = j.value("prefix", std::string("##"));
    const bool cleanup = j.value("cleanup", true);
    return [prefix, cleanup](std::vector<std::string> toks) {
        for (size_t i = 0; i < toks.size(); ++i) {
            auto& t = toks[i];
            if (i > 0) {
                if (t.compare(0, prefix.size(), prefix) == 0)
                    t.erase(0, prefix.size());
                else
                    t.insert(0, 1, ' ');
            }
            if (cleanup) t = wordpiece_cleanup(std::move(t));
        }
        return toks;
    };
}

}  // namespace

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
        return [](const std::vector<std::string>& toks) {
            std::string joined;
            for (const auto& t : toks) joined += t;
            return std::vector<std::string>{from_byte_level(joined)};
        };
    if (type == "ByteFallback") return fuse_byte_tokens;
    if (type == "Metaspace") return metaspace_decoder(j, src);
    if (type == "Fuse")
        return [](const std::vector<std::string>& toks) {
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
        const auto start = json_int_or<size_t>(j, "start", 0),
                   stop = json_int_or<size_t>(j, "stop", 0);
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
    if (type == "WordPiece") return wordpiece_decoder(j);
    throw InputError(src, "decoder type '" + type + "' is not supported");
}

}  // namespace cl::detail

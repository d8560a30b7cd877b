#include "engine/tokenizer/tokenizer_parts.h"

#include <unicase.h>
#include <uninorm.h>

#include <algorithm>

namespace cl::detail {

std::string unicode_normalize(const std::string& s, uninorm_t form) {
    size_t len = 0;
    uint8_t* r =
        u8_normalize(form, reinterpret_cast<const uint8_t*>(s.data()), s.size(), nullptr, &len);
    if (!r) return s;
    std::string out(reinterpret_cast<char*>(r), len);
    free(r);
    return out;
}

namespace {

// `s` with every match of `re` replaced by `with(match)`.
template <typename With>
std::string replace_matches(const Regex& re, const std::string& s, With with) {
    std::string out;
    size_t last = 0;
    for (auto [b, e] : re.find_all(s)) {
        out += s.substr(last, b - last);
        out += with(s.substr(b, e - b));
        last = e;
    }
    return out + s.substr(last);
}

std::string lowercase(std::string s) {
    size_t len = 0;
    uint8_t* r = u8_tolower(reinterpret_cast<const uint8_t*>(s.data()), s.size(), nullptr, nullptr,
                            nullptr, &len);
    if (!r) return s;
    std::string out(reinterpret_cast<char*>(r), len);
    free(r);
    return out;
}

// BERT's normaliser: control characters removed and whitespace made ' ' (clean_text), CJK
// ideographs padded with spaces, accents stripped (NFD, nonspacing marks removed; by default
// when lowercasing), lowercase; in the reference's order.
Normalizer bert_normalizer(const json& j, const std::string& src) {
    const bool clean_text = j.value("clean_text", true);
    const bool chinese = j.value("handle_chinese_chars", true);
    const bool lower = j.value("lowercase", true);
    const bool strip_accents = j.contains("strip_accents") && !j["strip_accents"].is_null()
                                   ? j["strip_accents"].get<bool>()
                                   : lower;
    auto control = std::make_shared<Regex>("[\\x{0}\\x{FFFD}]|(?![\\t\\n\\r])\\p{C}", src);
    auto space = std::make_shared<Regex>("\\s", src);
    auto cjk = std::make_shared<Regex>(
        "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2B73F}"
        "\\x{2B740}-\\x{2B81F}\\x{2B920}-\\x{2CEAF}\\x{F900}-\\x{FAFF}\\x{2F800}-\\x{2FA1F}]",
        src);
    auto mark = std::make_shared<Regex>("\\p{Mn}", src);
    return [=](std::string s) {
        if (clean_text) {
            s = replace_matches(*control, s, [](const std::string&) { return std::string(); });
            s = replace_matches(*space, s, [](const std::string&) { return std::string(" "); });
        }
        if (chinese)
            s = replace_matches(*cjk, s, [](const std::string& c) { return " " + c + " "; });
        if (strip_accents)
            s = replace_matches(*mark, unicode_normalize(s, UNINORM_NFD),
                                [](const std::string&) { return std::string(); });
        return lower ? lowercase(std::move(s)) : s;
    };
}

}  // namespace

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
    if (type == "NFC")
        return [](const std::string& s) { return unicode_normalize(s, UNINORM_NFC); };
    if (type == "NFD")
        return [](const std::string& s) { return unicode_normalize(s, UNINORM_NFD); };
    if (type == "NFKC")
        return [](const std::string& s) { return unicode_normalize(s, UNINORM_NFKC); };
    if (type == "NFKD")
        return [](const std::string& s) { return unicode_normalize(s, UNINORM_NFKD); };
    if (type == "Lowercase") return lowercase;
    if (type == "BertNormalizer") return bert_normalizer(j, src);
    if (type == "StripAccents") {  // combining marks removed (after an NFD, as files pair them)
        auto mark = std::make_shared<Regex>("\\p{Mn}", src);
        return [mark](const std::string& s) {
            return replace_matches(*mark, s, [](const std::string&) { return std::string(); });
        };
    }
    if (type == "Prepend") {
        const auto prefix = j.at("prepend").get<std::string>();
        return [prefix](const std::string& s) { return s.empty() ? s : prefix + s; };
    }
    if (type == "Replace") {
        auto re = compile_pattern(j.at("pattern"), src);
        const auto content = j.at("content").get<std::string>();
        return [re, content](const std::string& s) {
            return replace_matches(
                *re, s, [&](const std::string&) -> const std::string& { return content; });
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

}  // namespace cl::detail

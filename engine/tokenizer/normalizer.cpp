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
        return [prefix](const std::string& s) { return s.empty() ? s : prefix + s; };
    }
    if (type == "Replace") {
        auto re = compile_pattern(j.at("pattern"), src);
        const auto content = j.at("content").get<std::string>();
        return [re, content](const std::string& s) {
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

}  // namespace cl::detail

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_parts.h"

#include <unistr.h>

#include <unordered_map>

namespace cl::detail {

// Length of the valid UTF-8 sequence at s[i], or 0 if invalid (libunistring rejects overlong
// forms, surrogates and code points above U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i) {
    if (s[i] == '\0') return 1;  // u8_mblen reports NUL as length 0
    const int n = u8_mblen(reinterpret_cast<const uint8_t*>(s.data() + i), s.size() - i);
    return n > 0 ? static_cast<size_t>(n) : 0;
}

std::string encode_codepoint(uint32_t cp) {
    uint8_t buf[6];
    const int n = u8_uctomb(buf, cp, sizeof buf);
    return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(std::max(n, 0)));
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

std::string to_byte_level(const std::string& s) {
    const auto& alphabet = byte_level_alphabet();
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) out += alphabet[c];
    return out;
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

}  // namespace cl::detail

namespace cl {

using detail::encode_codepoint;
using detail::utf8_sequence_length;

bool is_valid_utf8(std::string_view text) {
    return u8_check(reinterpret_cast<const uint8_t*>(text.data()), text.size()) == nullptr;
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

}  // namespace cl

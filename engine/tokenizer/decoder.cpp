#include "engine/tokenizer/tokenizer_parts.h"

#include <algorithm>

#include "engine/base/json_int.h"

namespace cl::detail {

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
    throw InputError(src, "decoder type '" + type + "' is not supported");
}

}  // namespace cl::detail

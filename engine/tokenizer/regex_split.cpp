#include "engine/tokenizer/tokenizer_parts.h"

#include <algorithm>

namespace cl::detail {

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

extern const char* const kGpt2Pattern;
const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

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

SplitBehavior parse_behavior(const std::string& b, const std::string& src) {
    if (b == "Removed") return SplitBehavior::Removed;
    if (b == "Isolated") return SplitBehavior::Isolated;
    if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
    if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
    if (b == "Contiguous") return SplitBehavior::Contiguous;
    throw InputError(src, "split behavior '" + b + "' is not supported");
}

}  // namespace cl::detail

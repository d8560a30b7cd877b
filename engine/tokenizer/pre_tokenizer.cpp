#include "engine/tokenizer/tokenizer_parts.h"

#include <algorithm>
#include "engine/tokenizer/tokenizer.h"

namespace cl::detail {

namespace {

// SentencePiece's space handling as Hugging Face's Metaspace: spaces become the replacement
// character, which is prepended (always; or, "first", only at the start of the input) unless the
// piece starts with it, and pieces split before each one (MergedWithNext).
PreTokenizer metaspace(const json& j, const std::string& src, bool input_start) {
    const MetaspaceOptions options = read_metaspace(j, src);
    const std::string replacement = options.replacement, scheme = options.scheme;
    const bool prepend = scheme == "always" || (scheme == "first" && input_start);
    const bool split = j.value("split", true);
    auto re = compile_pattern(json{{"String", replacement}}, src);
    return [=](std::vector<std::string> pieces) {
        std::vector<std::string> out;
        for (size_t i = 0; i < pieces.size(); ++i) {
            std::string s;
            for (char c : pieces[i]) c == ' ' ? s += replacement : s += c;
            const bool first_piece = scheme == "always" || i == 0;
            if (prepend && first_piece && s.compare(0, replacement.size(), replacement) != 0)
                s.insert(0, replacement);
            if (!split) {
                out.push_back(std::move(s));
                continue;
            }
            for (auto& part : split_with(*re, s, SplitBehavior::MergedWithNext, false))
                out.push_back(std::move(part));
        }
        return out;
    };
}

// Unicode punctuation plus ASCII's symbols, as BERT counts punctuation.
constexpr const char* kPunctuationClass = "[\\p{P}!-/:-@\\[-`{-~]";

// The Whitespace pre-tokenizer's \w+|[^\w\s]+ with \w as the reference's (Rust's) regex defines
// it, which PCRE2's \w is not: marks and the joiners are word characters, other numbers (No) not.
constexpr const char* kWordsOrSymbols =
    "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]+"
    "|[^\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}\\s]+";

// Splits every piece around `re`'s matches (`invert`: the matches are the pieces to keep).
PreTokenizer splitting(const std::shared_ptr<Regex>& re, SplitBehavior behavior, bool invert) {
    return [=](const std::vector<std::string>& pieces) {
        std::vector<std::string> out;
        for (const auto& p : pieces)
            for (auto& s : split_with(*re, p, behavior, invert)) out.push_back(std::move(s));
        return out;
    };
}

}  // namespace

MetaspaceOptions read_metaspace(const json& j, const std::string& src) {
    MetaspaceOptions o{j.value("replacement", std::string("\u2581")),
                       j.value("prepend_scheme", std::string())};
    if (o.replacement.empty()) throw InputError(src, "Metaspace replacement is empty");
    if (o.scheme.empty()) o.scheme = j.value("add_prefix_space", true) ? "always" : "never";
    if (o.scheme != "always" && o.scheme != "first" && o.scheme != "never")
        throw InputError(src, "Metaspace prepend_scheme '" + o.scheme + "' is not supported");
    return o;
}

PreTokenizer make_pre_tokenizer(const json& j, const std::string& src, bool input_start) {
    if (j.is_null()) return nullptr;
    const auto type = j.value("type", std::string());
    if (type == "Metaspace") return metaspace(j, src, input_start);
    if (type == "Sequence") {
        std::vector<PreTokenizer> parts;
        for (const auto& p : j.at("pretokenizers"))
            parts.push_back(make_pre_tokenizer(p, src, input_start));
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
    if (type == "Split")
        return splitting(compile_pattern(j.at("pattern"), src),
                         parse_behavior(j.value("behavior", std::string("Isolated")), src),
                         j.value("invert", false));
    if (type == "Digits") {
        const bool individual = j.value("individual_digits", false);
        return splitting(std::make_shared<Regex>(individual ? "\\p{N}" : "\\p{N}+", src),
                         SplitBehavior::Isolated, false);
    }
    if (type == "WhitespaceSplit")
        return splitting(std::make_shared<Regex>("\\s+", src), SplitBehavior::Removed, false);
    if (type == "Whitespace") {  // runs of word characters or of other non-space characters
        auto re = std::make_shared<Regex>(kWordsOrSymbols, src);
        return splitting(re, SplitBehavior::Removed, true);
    }
    if (type == "Punctuation") {
        auto re = std::make_shared<Regex>(kPunctuationClass, src);
        return splitting(re, parse_behavior(j.value("behavior", std::string("Isolated")), src),
                         false);
    }
    if (type == "BertPreTokenizer") {  // whitespace removed, each punctuation character alone
        auto space = splitting(std::make_shared<Regex>("\\s+", src), SplitBehavior::Removed, false);
        auto punct = splitting(std::make_shared<Regex>(kPunctuationClass, src),
                               SplitBehavior::Isolated, false);
        return [=](std::vector<std::string> pieces) { return punct(space(std::move(pieces))); };
    }
    throw InputError(src, "pre_tokenizer type '" + type + "' is not supported");
}

}  // namespace cl::detail

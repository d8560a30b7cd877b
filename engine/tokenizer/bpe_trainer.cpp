// Writing tokenizers: the byte-level BPE tokenizer.json CacheLens models ship with, and training
// its merges on a sample of text (the trainer and init-model use these).
#include "engine/tokenizer/bpe_trainer.h"

#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "engine/base/errors.h"
#include "engine/tokenizer/tokenizer.h"

namespace cl {

std::string make_byte_level_tokenizer_json(const std::vector<std::string>& merges,
                                           bool split_digits) {
    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    const auto& alphabet = byte_level_alphabet();
    int32_t next = 0;
    for (int b = 0; b < 256; ++b) vocab[alphabet[static_cast<size_t>(b)]] = next++;
    nlohmann::json merge_list = nlohmann::json::array();
    for (const auto& m : merges) {
        const auto sp = m.find(' ');
        const auto merged = m.substr(0, sp) + m.substr(sp + 1);
        if (!vocab.contains(merged)) vocab[merged] = next++;
        merge_list.push_back(m);
    }
    nlohmann::json added = nlohmann::json::array();
    for (const char* s :
         {SpecialTokens::kBos, SpecialTokens::kEos, SpecialTokens::kMask,
          SpecialTokens::kStartHeader, SpecialTokens::kEndHeader, SpecialTokens::kEot}) {
        added.push_back({{"id", next++},
                         {"content", s},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    }
    nlohmann::ordered_json j;
    j["version"] = "1.0";
    j["truncation"] = nullptr;
    j["padding"] = nullptr;
    j["added_tokens"] = added;
    j["normalizer"] = nullptr;
    const nlohmann::json byte_level = {{"type", "ByteLevel"},
                                       {"add_prefix_space", false},
                                       {"trim_offsets", true},
                                       {"use_regex", true}};
    if (split_digits) {
        const nlohmann::json digits = {{"type", "Split"},
                                       {"pattern", {{"Regex", "\\p{N}"}}},
                                       {"behavior", "Isolated"},
                                       {"invert", false}};
        j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {digits, byte_level}}};
    } else {
        j["pre_tokenizer"] = byte_level;
    }
    j["post_processor"] = nullptr;
    j["decoder"] = {{"type", "ByteLevel"},
                    {"add_prefix_space", true},
                    {"trim_offsets", true},
                    {"use_regex", true}};
    j["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", false},
                  {"byte_fallback", false},
                  {"ignore_merges", false},
                  {"vocab", vocab},
                  {"merges", merge_list}};
    return j.dump(1);
}

std::string train_byte_level_bpe(const std::vector<std::string>& texts, int vocab_size,
                                 bool split_digits) {
    if (vocab_size < 262 || vocab_size > 1'000'000)
        throw InputError(Setting{"vocab_size"}, "must be between 262 and 1000000");
    // Pre-tokenize with exactly the pipeline the finished tokenizer will use.
    auto base =
        Tokenizer::from_json_text(make_byte_level_tokenizer_json({}, split_digits), "bpe-trainer");
    std::unordered_map<std::string, int64_t> word_counts;
    for (const auto& t : texts)
        for (auto& piece : base->pre_tokenize(t)) ++word_counts[piece];
    // Symbols are strings in the byte-level alphabet; words are sequences of symbol ids.
    std::vector<std::string> symbols;
    std::unordered_map<std::string, int32_t> symbol_id;
    auto intern = [&](const std::string& s) {
        auto it = symbol_id.find(s);
        if (it != symbol_id.end()) return it->second;
        symbols.push_back(s);
        return symbol_id[s] = static_cast<int32_t>(symbols.size() - 1);
    };
    struct Word {
        std::vector<int32_t> ids;
        int64_t count;
    };
    std::vector<Word> words;
    for (const auto& [w, n] : word_counts) {
        Word word{{}, n};
        size_t i = 0;
        while (i < w.size()) {  // split into UTF-8 characters of the byte-level alphabet
            size_t len = 1;
            const auto c = static_cast<unsigned char>(w[i]);
            if (c >= 0xf0)
                len = 4;
            else if (c >= 0xe0)
                len = 3;
            else if (c >= 0xc0)
                len = 2;
            word.ids.push_back(intern(w.substr(i, len)));
            i += len;
        }
        words.push_back(std::move(word));
    }
    std::vector<std::string> merges;
    const int target_merges = vocab_size - 6 - 256;
    while (static_cast<int>(merges.size()) < target_merges) {
        std::map<std::pair<int32_t, int32_t>, int64_t> pairs;
        for (const auto& w : words)
            for (size_t i = 0; i + 1 < w.ids.size(); ++i)
                pairs[{w.ids[i], w.ids[i + 1]}] += w.count;
        if (pairs.empty()) break;
        auto best = pairs.begin();
        for (auto it = pairs.begin(); it != pairs.end(); ++it)
            if (it->second > best->second) best = it;  // ties: smallest ids (map order)
        if (best->second < 2) break;
        const auto [a, b] = best->first;
        const int32_t merged = intern(symbols[a] + symbols[b]);
        merges.push_back(symbols[a] + " " + symbols[b]);
        for (auto& w : words) {
            std::vector<int32_t> out;
            out.reserve(w.ids.size());
            for (size_t i = 0; i < w.ids.size(); ++i) {
                if (i + 1 < w.ids.size() && w.ids[i] == a && w.ids[i + 1] == b) {
                    out.push_back(merged);
                    ++i;
                } else
                    out.push_back(w.ids[i]);
            }
            w.ids = std::move(out);
        }
    }
    return make_byte_level_tokenizer_json(merges, split_digits);
}

}  // namespace cl

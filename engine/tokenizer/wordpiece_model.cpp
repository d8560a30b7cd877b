// The WordPiece model of tokenizer.json (BERT): greedy longest match from the left, pieces after
// the first carrying the continuing-subword prefix ("##"); a word with a part no piece matches,
// or longer than max_input_chars_per_word characters, becomes the single unknown token.
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_parts.h"

namespace cl::detail {
namespace {

class WordPieceModel final : public SubwordModel {
public:
    WordPieceModel(const json& model, const std::string& src) {
        m_vocab.add_object(model, "WordPiece", src);
        const auto unk = model.value("unk_token", std::string("[UNK]"));
        const auto unk_id = m_vocab.find(unk);
        if (!unk_id)
            throw InputError(
                src, "WordPiece unk_token '" + sanitize_utf8(unk) + "' is not in the vocab");
        m_unk_id = *unk_id;
        m_prefix = model.value("continuing_subword_prefix", std::string("##"));
        const auto max_chars = model.value("max_input_chars_per_word", int64_t{100});
        if (max_chars < 1) throw InputError(src, "WordPiece max_input_chars_per_word must be >= 1");
        m_max_chars = static_cast<size_t>(max_chars);
    }

    std::vector<int32_t> tokenize(const std::string& word) const override {
        const auto chars = split_chars(word);
        if (chars.size() > m_max_chars) return {m_unk_id};
        // Byte offset of each character boundary, so that candidates shrink by whole characters.
        std::vector<size_t> boundary{0};
        for (const auto& c : chars) boundary.push_back(boundary.back() + c.size());
        std::vector<int32_t> ids;
        for (size_t first = 0; first < chars.size();) {
            const auto [id, last] = longest_match(word, boundary, first);
            if (!id) return {m_unk_id};
            ids.push_back(*id);
            first = last;
        }
        return ids;
    }

private:
    int32_t m_unk_id = 0;

    // The longest vocabulary piece starting at character `first` (prefixed after the word's
    // start) and the character it ends before.
    std::pair<std::optional<int32_t>, size_t> longest_match(const std::string& word,
                                                            const std::vector<size_t>& boundary,
                                                            size_t first) const {
        for (size_t last = boundary.size() - 1; last > first; --last) {
            std::string candidate = word.substr(boundary[first], boundary[last] - boundary[first]);
            if (first > 0) candidate.insert(0, m_prefix);
            if (auto id = m_vocab.find(candidate)) return {id, last};
        }
        return {std::nullopt, first};
    }
    std::string m_prefix;
    size_t m_max_chars = 100;
};

}  // namespace

std::unique_ptr<SubwordModel> make_wordpiece_model(const json& model, const std::string& src) {
    return std::make_unique<WordPieceModel>(model, src);
}

}  // namespace cl::detail

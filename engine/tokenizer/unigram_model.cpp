// The Unigram model of tokenizer.json (SentencePiece's unigram language model): the
// segmentation of a piece with the highest total log-probability (Viterbi over the vocabulary's
// prefixes), an unknown character scored 10 below the least likely piece, consecutive unknowns
// fused, and optional byte fallback; tie-breaking as in the `tokenizers` library.
#include <limits>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_parts.h"

namespace cl::detail {
namespace {

constexpr double kUnknownPenalty = 10.0;  // the reference's K_UNK_PENALTY

class UnigramModel final : public SubwordModel {
public:
    UnigramModel(const json& model, const std::string& src) {
        if (!model.contains("vocab") || !model["vocab"].is_array())
            throw InputError(src, "Unigram model has no vocab list");
        const auto& vocab = model["vocab"];
        m_scores.reserve(vocab.size());
        for (size_t id = 0; id < vocab.size(); ++id) {
            const auto& entry = vocab[id];
            if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() ||
                !entry[1].is_number())
                throw InputError(
                    src, "Unigram vocab entry " + std::to_string(id) + " is not [piece, score]");
            const auto piece = entry[0].get<std::string>();
            if (piece.empty())
                throw InputError(src, "Unigram vocab entry " + std::to_string(id) + " is empty");
            m_vocab.add(piece, static_cast<int64_t>(id), src);
            m_scores.push_back(entry[1].get<double>());
            m_min_score = std::min(m_min_score, m_scores.back());
            m_longest_piece = std::max(m_longest_piece, piece.size());
        }
        if (model.contains("unk_id") && !model["unk_id"].is_null()) {
            const auto unk = model["unk_id"].get<int64_t>();
            if (unk < 0 || static_cast<size_t>(unk) >= vocab.size())
                throw InputError(src,
                                 "Unigram unk_id " + std::to_string(unk) + " is outside the vocab");
            m_unk_id = static_cast<int32_t>(unk);
        }
        m_byte_fallback = model.value("byte_fallback", false);
    }

    // The best segmentation's pieces as ids; a piece the vocabulary lacks (a fused run of unknown
    // characters) becomes its byte tokens when byte_fallback allows, else unk.
    std::vector<int32_t> tokenize(const std::string& piece) const override {
        std::vector<int32_t> ids;
        for (const auto& text : best_segmentation(piece)) {
            if (auto id = m_vocab.find(text)) {
                ids.push_back(*id);
                continue;
            }
            if (m_byte_fallback && append_byte_tokens(m_vocab, text, ids)) continue;
            ids.push_back(unknown_id(text));
        }
        return ids;
    }

private:
    std::vector<double> m_scores;  // by id
    double m_min_score = std::numeric_limits<double>::infinity();
    size_t m_longest_piece = 0;
    std::optional<int32_t> m_unk_id;
    bool m_byte_fallback = false;

    // The best path's last step into each byte position: where it starts and which token.
    struct Node {
        double score = 0.0;
        size_t starts_at = std::string::npos;  // npos: not reached yet
        int32_t id = -1;
    };

    static bool beats(const Node& target, double candidate) {
        return target.starts_at == std::string::npos || candidate > target.score;
    }
    static void relax(Node& target, double candidate, size_t start, int32_t id) {
        if (beats(target, candidate)) target = Node{candidate, start, id};
    }

    int32_t unknown_id(const std::string& text) const {
        if (!m_unk_id)
            throw InputError("the Unigram tokenizer cannot encode '" + sanitize_utf8(text) +
                             "': no piece covers it and the model has no unk_id");
        return *m_unk_id;
    }

    // The pieces of the best path, from the start of `piece`; consecutive unknown characters are
    // fused into one piece.
    std::vector<std::string> best_segmentation(const std::string& piece) const {
        std::vector<Node> best(piece.size() + 1);
        const double unknown_score = m_min_score - kUnknownPenalty;
        for (size_t start = 0; start < piece.size();) {
            size_t char_len = utf8_sequence_length(piece, start);
            if (char_len == 0) char_len = 1;
            const double here = best[start].score;
            bool single_char_token = false;
            // Prefixes in increasing length, as the reference's trie yields them (ties keep the
            // first path found).
            const size_t longest = std::min(m_longest_piece, piece.size() - start);
            for (size_t len = 1; len <= longest; ++len) {
                const auto id = m_vocab.find(piece.substr(start, len));
                if (!id) continue;
                relax(best[start + len], here + m_scores[static_cast<size_t>(*id)], start, *id);
                if (len == char_len) single_char_token = true;
            }
            Node& after_char = best[start + char_len];
            if (!single_char_token && beats(after_char, here + unknown_score))
                after_char =
                    Node{here + unknown_score, start, unknown_id(piece.substr(start, char_len))};
            start += char_len;
        }
        std::vector<std::string> reversed;
        bool previous_unknown = false;
        for (size_t end = piece.size(); end > 0;) {
            const Node& n = best[end];
            std::string text = piece.substr(n.starts_at, end - n.starts_at);
            const bool unknown = n.id == m_unk_id;
            if (unknown && previous_unknown)
                reversed.back().insert(0, text);
            else
                reversed.push_back(std::move(text));
            previous_unknown = unknown;
            end = n.starts_at;
        }
        return {reversed.rbegin(), reversed.rend()};
    }
};

}  // namespace

std::unique_ptr<SubwordModel> make_unigram_model(const json& model, const std::string& src) {
    return std::make_unique<UnigramModel>(model, src);
}

}  // namespace cl::detail

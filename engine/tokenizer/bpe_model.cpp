// The BPE model of tokenizer.json: merges applied by rank to a piece's characters, with
// SentencePiece's byte fallback and an optional unknown token (the `tokenizers` library's rules).
#include <climits>
#include <mutex>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_parts.h"

namespace cl::detail {
namespace {

class BpeModel final : public SubwordModel {
public:
    BpeModel(const json& model, const std::string& src) {
        m_vocab.add_object(model, "BPE", src);
        if (model.contains("merges")) read_merges(model["merges"], src);
        if (model.contains("unk_token") && model["unk_token"].is_string())
            m_unk_id = m_vocab.find(model["unk_token"].get<std::string>());
        m_byte_fallback = model.value("byte_fallback", false);
        m_ignore_merges = model.value("ignore_merges", false);
        if (model.contains("continuing_subword_prefix") &&
            !model["continuing_subword_prefix"].is_null() &&
            !model["continuing_subword_prefix"].get<std::string>().empty())
            throw InputError(src, "continuing_subword_prefix is not supported");
    }

    std::vector<int32_t> tokenize(const std::string& piece) const override {
        {
            std::lock_guard lock(m_cache_mutex);
            auto it = m_cache.find(piece);
            if (it != m_cache.end()) return it->second;
        }
        auto direct = m_vocab.find(piece);
        std::vector<int32_t> ids =
            m_ignore_merges && direct ? std::vector<int32_t>{*direct} : merged(piece);
        std::lock_guard lock(m_cache_mutex);
        if (m_cache.size() > 100000) m_cache.clear();
        m_cache.emplace(piece, ids);
        return ids;
    }

private:
    struct Merge {
        int32_t rank;
        int32_t merged;
    };
    std::unordered_map<uint64_t, Merge> m_merges;  // key = (left id << 32) | right id
    std::optional<int32_t> m_unk_id;
    bool m_byte_fallback = false;
    bool m_ignore_merges = false;
    mutable std::mutex m_cache_mutex;
    mutable std::unordered_map<std::string, std::vector<int32_t>> m_cache;

    static uint64_t key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }

    void read_merges(const json& merges, const std::string& src) {
        int32_t rank = 0;
        for (const auto& mj : merges) {
            std::string a, b;
            if (mj.is_string()) {
                const auto s = mj.get<std::string>();
                const auto sp = s.find(' ');
                if (sp == std::string::npos)
                    throw InputError(src, "merge '" + s + "' has no space");
                a = s.substr(0, sp);
                b = s.substr(sp + 1);
            } else if (mj.is_array() && mj.size() == 2) {
                a = mj[0].get<std::string>();
                b = mj[1].get<std::string>();
            } else {
                throw InputError(src, "merge entry is neither \"a b\" nor [a, b]");
            }
            const auto ia = m_vocab.find(a), ib = m_vocab.find(b), im = m_vocab.find(a + b);
            if (!ia || !ib || !im)
                throw InputError(src, "merge '" + sanitize_utf8(a) + " " + sanitize_utf8(b) +
                                          "' refers to tokens missing from the vocab");
            m_merges.emplace(key(*ia, *ib), Merge{rank++, *im});
        }
    }

    // The piece's characters as ids: the character's token, else its byte tokens, else unk;
    // without either the character is dropped, as the reference does.
    std::vector<int32_t> character_ids(const std::string& piece) const {
        std::vector<int32_t> ids;
        for (const auto& ch : split_chars(piece)) {
            if (auto id = m_vocab.find(ch)) {
                ids.push_back(*id);
                continue;
            }
            if (m_byte_fallback && append_byte_tokens(m_vocab, ch, ids)) continue;
            if (m_unk_id) ids.push_back(*m_unk_id);
        }
        return ids;
    }

    // Repeatedly merges the lowest-ranked adjacent pair (leftmost on ties).
    std::vector<int32_t> merged(const std::string& piece) const {
        std::vector<int32_t> ids = character_ids(piece);
        while (ids.size() > 1) {
            int32_t best_rank = INT32_MAX, best_merged = -1;
            size_t best_pos = 0;
            for (size_t i = 0; i + 1 < ids.size(); ++i) {
                auto it = m_merges.find(key(ids[i], ids[i + 1]));
                if (it != m_merges.end() && it->second.rank < best_rank) {
                    best_rank = it->second.rank;
                    best_merged = it->second.merged;
                    best_pos = i;
                }
            }
            if (best_merged < 0) break;
            ids[best_pos] = best_merged;
            ids.erase(ids.begin() + static_cast<long>(best_pos) + 1);
        }
        return ids;
    }
};

}  // namespace

std::unique_ptr<SubwordModel> make_bpe_model(const json& model, const std::string& src) {
    return std::make_unique<BpeModel>(model, src);
}

}  // namespace cl::detail

#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "engine/base/errors.h"
#include "engine/base/json_int.h"
#include "engine/tokenizer/tokenizer_parts.h"

namespace cl {

// The pipeline parts (tokenizer_parts.h).
using detail::Decoder;
using detail::is_space_char;
using detail::make_decoder;
using detail::make_normalizer;
using detail::make_pre_tokenizer;
using detail::Normalizer;
using detail::PreTokenizer;
using detail::split_chars;

using json = nlohmann::json;

// ---- Tokenizer ---------------------------------------------------------------------------------

struct Tokenizer::Impl {
    std::string source;
    std::unordered_map<std::string, int32_t> vocab;
    std::vector<std::string> id_to_token;
    struct Merge {
        int32_t rank;
        int32_t merged;
    };
    std::unordered_map<uint64_t, Merge> merges;  // key = (left id << 32) | right id
    std::vector<AddedToken> added;
    std::unordered_map<int32_t, size_t> added_by_id;
    std::map<unsigned char, std::vector<size_t>> added_by_first_byte;  // longest first
    std::optional<int32_t> unk_id;
    bool byte_fallback = false;
    bool ignore_merges = false;
    Normalizer normalizer;
    PreTokenizer pre_tokenizer;        // for the segment at the start of the input
    PreTokenizer pre_tokenizer_later;  // for segments after an added token
    Decoder decoder;
    mutable std::mutex cache_mutex;
    mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

    static uint64_t key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }

    std::vector<int32_t> bpe(const std::string& word) const {
        {
            std::lock_guard lock(cache_mutex);
            auto it = cache.find(word);
            if (it != cache.end()) return it->second;
        }
        std::vector<int32_t> ids;
        auto direct = vocab.find(word);
        if (ignore_merges && direct != vocab.end()) {
            ids.push_back(direct->second);
        } else {
            for (const auto& ch : split_chars(word)) {
                auto it = vocab.find(ch);
                if (it != vocab.end()) {
                    ids.push_back(it->second);
                    continue;
                }
                if (byte_fallback) {
                    bool ok = true;
                    std::vector<int32_t> bytes;
                    for (unsigned char c : ch) {
                        char buf[8];
                        std::snprintf(buf, sizeof buf, "<0x%02X>", c);
                        auto b = vocab.find(buf);
                        if (b == vocab.end()) {
                            ok = false;
                            break;
                        }
                        bytes.push_back(b->second);
                    }
                    if (ok) {
                        ids.insert(ids.end(), bytes.begin(), bytes.end());
                        continue;
                    }
                }
                if (unk_id) ids.push_back(*unk_id);
                // Without unk or byte fallback the character is dropped, as the reference does.
            }
            // Repeatedly merge the lowest-ranked adjacent pair (leftmost on ties).
            while (ids.size() > 1) {
                int32_t best_rank = INT32_MAX, best_merged = -1;
                size_t best_pos = 0;
                for (size_t i = 0; i + 1 < ids.size(); ++i) {
                    auto it = merges.find(key(ids[i], ids[i + 1]));
                    if (it != merges.end() && it->second.rank < best_rank) {
                        best_rank = it->second.rank;
                        best_merged = it->second.merged;
                        best_pos = i;
                    }
                }
                if (best_merged < 0) break;
                ids[best_pos] = best_merged;
                ids.erase(ids.begin() + static_cast<long>(best_pos) + 1);
            }
        }
        std::lock_guard lock(cache_mutex);
        if (cache.size() > 100000) cache.clear();
        cache.emplace(word, ids);
        return ids;
    }

    void encode_segment(const std::string& text, bool at_input_start,
                        std::vector<int32_t>& out) const {
        if (text.empty()) return;
        std::string normalized = normalizer ? normalizer(text) : text;
        std::vector<std::string> pieces{normalized};
        const auto& pre = at_input_start ? pre_tokenizer : pre_tokenizer_later;
        if (pre) pieces = pre(std::move(pieces));
        for (const auto& p : pieces) {
            auto ids = bpe(p);
            out.insert(out.end(), ids.begin(), ids.end());
        }
    }
};

Tokenizer::Tokenizer() : m_impl(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "cannot open tokenizer file");
    std::stringstream buffer;
    buffer << in.rdbuf();
    return from_json_text(buffer.str(), path.string());
}

std::unique_ptr<Tokenizer> Tokenizer::from_json_text(const std::string& text,
                                                     const std::string& src) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {  // also out_of_range: a number like 8e3172
        throw InputError(src, std::string("invalid JSON: ") + e.what());
    }
    std::unique_ptr<Tokenizer> tok(new Tokenizer());
    Impl& m = *tok->m_impl;
    m.source = src;
    try {
        if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
            throw InputError(src, "no 'model' section");
        const auto& model = j["model"];
        const auto type = model.value("type", std::string("BPE"));
        if (type != "BPE")
            throw InputError(src, "model type '" + type + "' is not supported (expected BPE)");
        if (!model.contains("vocab") || !model["vocab"].is_object())
            throw InputError(src, "BPE model has no vocab object");
        int32_t max_id = -1;
        for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
            if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
                it->get<int64_t>() > 50'000'000)
                throw InputError(src,
                                 "vocab entry '" + sanitize_utf8(it.key()) + "' has an invalid id");
            const auto id = it->get<int32_t>();
            m.vocab[it.key()] = id;
            max_id = std::max(max_id, id);
        }
        m.id_to_token.assign(static_cast<size_t>(max_id) + 1, std::string());
        for (const auto& [t, id] : m.vocab) m.id_to_token[static_cast<size_t>(id)] = t;
        int32_t rank = 0;
        if (model.contains("merges")) {
            for (const auto& mj : model["merges"]) {
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
                auto ia = m.vocab.find(a), ib = m.vocab.find(b), im = m.vocab.find(a + b);
                if (ia == m.vocab.end() || ib == m.vocab.end() || im == m.vocab.end())
                    throw InputError(src, "merge '" + sanitize_utf8(a) + " " + sanitize_utf8(b) +
                                              "' refers to tokens missing from the vocab");
                m.merges.emplace(Impl::key(ia->second, ib->second),
                                 Impl::Merge{rank++, im->second});
            }
        }
        if (model.contains("unk_token") && model["unk_token"].is_string()) {
            auto it = m.vocab.find(model["unk_token"].get<std::string>());
            if (it != m.vocab.end()) m.unk_id = it->second;
        }
        m.byte_fallback = model.value("byte_fallback", false);
        m.ignore_merges = model.value("ignore_merges", false);
        if (model.contains("continuing_subword_prefix") &&
            !model["continuing_subword_prefix"].is_null() &&
            !model["continuing_subword_prefix"].get<std::string>().empty())
            throw InputError(src, "continuing_subword_prefix is not supported");

        if (j.contains("added_tokens")) {
            for (const auto& a : j["added_tokens"]) {
                AddedToken t;
                t.id = json_int<int32_t>(a.at("id"));
                t.content = a.at("content").get<std::string>();
                t.special = a.value("special", false);
                t.lstrip = a.value("lstrip", false);
                t.rstrip = a.value("rstrip", false);
                if (t.content.empty()) throw InputError(src, "an added token has empty content");
                if (t.id < 0)
                    throw InputError(src, "added token '" + t.content + "' has a negative id");
                m.added_by_id[t.id] = m.added.size();
                m.added.push_back(t);
            }
        }
        for (size_t i = 0; i < m.added.size(); ++i)
            m.added_by_first_byte[static_cast<unsigned char>(m.added[i].content[0])].push_back(i);
        for (auto& [c, list] : m.added_by_first_byte)
            std::sort(list.begin(), list.end(), [&](size_t a, size_t b) {
                return m.added[a].content.size() > m.added[b].content.size();
            });

        m.normalizer = make_normalizer(j.value("normalizer", json()), src);
        m.pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", json()), src, true);
        m.pre_tokenizer_later = make_pre_tokenizer(j.value("pre_tokenizer", json()), src, false);
        m.decoder = make_decoder(j.value("decoder", json()), src);
    } catch (const json::exception& e) {
        throw InputError(src, std::string("malformed tokenizer: ") + e.what());
    } catch (const std::range_error& e) {  // json_int: a number that is not a valid id or count
        throw InputError(src, std::string("malformed tokenizer: ") + e.what());
    }
    return tok;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
    if (!is_valid_utf8(text)) throw InputError("prompt is not valid UTF-8");
    const Impl& m = *m_impl;
    std::vector<int32_t> out;
    std::string pending;
    size_t i = 0, segment_start = 0;
    while (i < text.size()) {
        const AddedToken* hit = nullptr;
        auto it = m.added_by_first_byte.find(static_cast<unsigned char>(text[i]));
        if (it != m.added_by_first_byte.end()) {
            for (size_t idx : it->second) {
                const auto& t = m.added[idx];
                if (text.compare(i, t.content.size(), t.content) == 0) {
                    hit = &t;
                    break;
                }
            }
        }
        if (!hit) {
            pending.push_back(text[i]);
            ++i;
            continue;
        }
        if (hit->lstrip)
            while (!pending.empty() && is_space_char(pending.back())) pending.pop_back();
        m.encode_segment(pending, segment_start == 0, out);
        pending.clear();
        out.push_back(hit->id);
        i += hit->content.size();
        if (hit->rstrip)
            while (i < text.size() && is_space_char(text[i])) ++i;
        segment_start = i;
    }
    m.encode_segment(pending, segment_start == 0, out);
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    // As Hugging Face's: every token, added ones included (special ones unless skipped), goes
    // through the decoder in one chain (a Metaspace decoder drops the first token's "\u2581"
    // only); without a decoder the tokens are joined with spaces.
    const Impl& m = *m_impl;
    std::vector<std::string> tokens;
    for (int32_t id : ids) {
        auto a = m.added_by_id.find(id);
        if (a != m.added_by_id.end()) {
            const auto& t = m.added[a->second];
            if (!(skip_special && t.special)) tokens.push_back(t.content);
            continue;
        }
        if (id >= 0 && static_cast<size_t>(id) < m.id_to_token.size() && !m.id_to_token[id].empty())
            tokens.push_back(m.id_to_token[static_cast<size_t>(id)]);
    }
    std::string out;
    if (!m.decoder) {
        for (size_t i = 0; i < tokens.size(); ++i) {
            if (i) out += ' ';
            out += tokens[i];
        }
        return out;
    }
    for (const auto& p : m.decoder(std::move(tokens))) out += p;
    return out;
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
    const Impl& m = *m_impl;
    std::string normalized = m.normalizer ? m.normalizer(std::string(text)) : std::string(text);
    std::vector<std::string> pieces{normalized};
    if (m.pre_tokenizer) pieces = m.pre_tokenizer(std::move(pieces));
    return pieces;
}

std::string Tokenizer::token_text(int32_t id) const {
    return sanitize_utf8(decode({id}));
}

std::optional<int32_t> Tokenizer::token_to_id(const std::string& token) const {
    for (const auto& t : m_impl->added)
        if (t.content == token) return t.id;
    auto it = m_impl->vocab.find(token);
    if (it != m_impl->vocab.end()) return it->second;
    return std::nullopt;
}

int32_t Tokenizer::required_token_id(const std::string& token) const {
    if (auto id = token_to_id(token)) return *id;
    throw InputError(m_impl->source + ": the tokenizer has no " + token + " token");
}

int32_t Tokenizer::vocab_size() const {
    int32_t n = static_cast<int32_t>(m_impl->id_to_token.size());
    for (const auto& t : m_impl->added) n = std::max(n, t.id + 1);
    return n;
}

bool Tokenizer::is_special(int32_t id) const {
    auto a = m_impl->added_by_id.find(id);
    return a != m_impl->added_by_id.end() && m_impl->added[a->second].special;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
    return m_impl->added;
}

}  // namespace cl

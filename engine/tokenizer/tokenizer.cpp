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

using json = nlohmann::json;

namespace detail {

void Vocabulary::add(const std::string& token, int64_t id, const std::string& src) {
    if (id < 0 || id > 50'000'000)
        throw InputError(src, "vocab entry '" + sanitize_utf8(token) + "' has an invalid id");
    const auto i = static_cast<int32_t>(id);
    ids[token] = i;
    if (tokens.size() <= static_cast<size_t>(i)) tokens.resize(static_cast<size_t>(i) + 1);
    tokens[static_cast<size_t>(i)] = token;
}

void Vocabulary::add_object(const json& model, const char* model_type, const std::string& src) {
    if (!model.contains("vocab") || !model["vocab"].is_object())
        throw InputError(src, std::string(model_type).append(" model has no vocab object"));
    for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
        if (!it->is_number_integer())
            throw InputError(src,
                             "vocab entry '" + sanitize_utf8(it.key()) + "' has an invalid id");
        add(it.key(), it->get<int64_t>(), src);
    }
}

bool append_byte_tokens(const Vocabulary& vocab, const std::string& text,
                        std::vector<int32_t>& out) {
    std::vector<int32_t> bytes;
    for (unsigned char c : text) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", c);
        const auto id = vocab.find(buf);
        if (!id) return false;
        bytes.push_back(*id);
    }
    out.insert(out.end(), bytes.begin(), bytes.end());
    return true;
}

}  // namespace detail

namespace {

std::unique_ptr<detail::SubwordModel> make_model(const json& model, const std::string& src) {
    if (!model.is_object()) throw InputError(src, "no 'model' section");
    const auto type = model.value("type", std::string("BPE"));
    if (type == "BPE") return detail::make_bpe_model(model, src);
    if (type == "Unigram") return detail::make_unigram_model(model, src);
    if (type == "WordPiece") return detail::make_wordpiece_model(model, src);
    throw InputError(
        src, "model type '" + type + "' is not supported (expected BPE, Unigram or WordPiece)");
}

}  // namespace

// ---- Tokenizer ---------------------------------------------------------------------------------

struct Tokenizer::Impl {
    std::string source;
    std::unique_ptr<detail::SubwordModel> model;
    std::vector<AddedToken> added;
    std::unordered_map<int32_t, size_t> added_by_id;
    std::map<unsigned char, std::vector<size_t>> added_by_first_byte;  // longest first
    Normalizer normalizer;
    PreTokenizer pre_tokenizer;        // for the segment at the start of the input
    PreTokenizer pre_tokenizer_later;  // for segments after an added token
    Decoder decoder;
    detail::PostProcessor post_processor;

    const detail::Vocabulary& vocab() const { return model->vocabulary(); }

    void encode_segment(const std::string& text, bool at_input_start,
                        std::vector<int32_t>& out) const {
        if (text.empty()) return;
        std::string normalized = normalizer ? normalizer(text) : text;
        std::vector<std::string> pieces{normalized};
        const auto& pre = at_input_start ? pre_tokenizer : pre_tokenizer_later;
        if (pre) pieces = pre(std::move(pieces));
        for (const auto& p : pieces) {
            auto ids = model->tokenize(p);
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
        m.model = make_model(j["model"], src);
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
        m.post_processor = detail::make_post_processor(j.value("post_processor", json()), src);
    } catch (const json::exception& e) {
        throw InputError(src, std::string("malformed tokenizer: ") + e.what());
    } catch (const std::range_error& e) {  // json_int: a number that is not a valid id or count
        throw InputError(src, std::string("malformed tokenizer: ") + e.what());
    }
    return tok;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
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
    if (add_special_tokens && m.post_processor) return m.post_processor(std::move(out));
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
        const auto& by_id = m.vocab().tokens;
        if (id >= 0 && static_cast<size_t>(id) < by_id.size() && !by_id[id].empty())
            tokens.push_back(by_id[static_cast<size_t>(id)]);
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
    return m_impl->vocab().find(token);
}

int32_t Tokenizer::required_token_id(const std::string& token) const {
    if (auto id = token_to_id(token)) return *id;
    throw InputError(m_impl->source + ": the tokenizer has no " + token + " token");
}

int32_t Tokenizer::vocab_size() const {
    auto n = static_cast<int32_t>(m_impl->vocab().tokens.size());
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

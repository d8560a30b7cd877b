#include <nlohmann/json.hpp>

#include "engine/base/errors.h"
#include "engine/model/arch_llada.h"
#include "engine/model/model_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "test_util.h"

namespace cl {
namespace {

std::unique_ptr<Tokenizer> byte_level() {
    return Tokenizer::from_json_text(make_byte_level_tokenizer_json(), "byte-level");
}

TEST(Tokenizer, ByteLevelRoundTripsAscii) {
    auto tok = byte_level();
    const std::string text = "Hello, world! 1 + 2 = 3\n\ttabs  and  spaces";
    auto ids = tok->encode(text);
    EXPECT_EQ(ids.size(), text.size());  // no merges: one id per byte
    EXPECT_EQ(tok->decode(ids), text);
}

TEST(Tokenizer, RoundTripsUnicode) {
    auto tok = Tokenizer::load(test::data_dir() / "tokenizer_hf_bpe.json");
    for (const std::string text :
         {"Café déjà vu", "日本語のテキスト", "emoji 🙂🚀 👩‍💻", "mixed 12345 ok"})
        EXPECT_EQ(tok->decode(tok->encode(text)), text) << text;
}

TEST(Tokenizer, SpecialTokensAreSingleIds) {
    auto tok = byte_level();
    const auto mask = tok->token_to_id(SpecialTokens::kMask);
    ASSERT_TRUE(mask.has_value());
    auto ids = tok->encode(std::string("a") + SpecialTokens::kMask + "b");
    ASSERT_EQ(ids.size(), 3u);
    EXPECT_EQ(ids[1], *mask);
    EXPECT_TRUE(tok->is_special(*mask));
    EXPECT_EQ(tok->decode(ids, /*skip_special=*/true), "ab");
    EXPECT_EQ(tok->decode(ids, false), std::string("a") + SpecialTokens::kMask + "b");
}

// A SentencePiece-style tokenizer.json as in LLaMA-2-family checkpoints: "▁" for spaces, BPE with
// byte fallback, and the decoder Replace("▁", " ") + ByteFallback + Fuse + Strip(" ", 1, 0).
std::unique_ptr<Tokenizer> sentencepiece_style() {
    nlohmann::json vocab = {{"<unk>", 0}, {"\u2581", 1}, {"a", 2}, {"b", 3}, {"\u2581a", 4}};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        vocab[name] = 5 + b;
    }
    const nlohmann::json j = {
        {"version", "1.0"},
        {"added_tokens", nlohmann::json::array()},
        {"normalizer",
         {{"type", "Sequence"},
          {"normalizers",
           {{{"type", "Prepend"}, {"prepend", "\u2581"}},
            {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
        {"pre_tokenizer", nullptr},
        {"post_processor", nullptr},
        {"decoder",
         {{"type", "Sequence"},
          {"decoders",
           {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}},
            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
        {"model",
         {{"type", "BPE"},
          {"byte_fallback", true},
          {"unk_token", "<unk>"},
          {"vocab", vocab},
          {"merges", {"\u2581 a"}}}}};
    return Tokenizer::from_json_text(j.dump(), "sentencepiece-style");
}

TEST(Tokenizer, SentencePieceStyleByteFallbackRoundTrips) {
    auto tok = sentencepiece_style();
    // "a é": "▁a", "▁", then é as its two UTF-8 bytes.
    const auto ids = tok->encode("a \xc3\xa9");
    EXPECT_EQ(ids, (std::vector<int32_t>{4, 1, 5 + 0xC3, 5 + 0xA9}));
    EXPECT_EQ(tok->decode(ids), "a \xc3\xa9");
    EXPECT_EQ(tok->decode(tok->encode("ab ba \xf0\x9f\x99\x82")), "ab ba \xf0\x9f\x99\x82");
    // A byte run that is not UTF-8 decodes to one U+FFFD per byte, as Hugging Face's does.
    EXPECT_EQ(tok->decode({2, 5 + 0xC3, 5 + 0x28}), "a\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(Tokenizer, ChatTemplateFollowsLlada) {
    auto tok = byte_level();
    for (const auto* t : {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"})
        ASSERT_TRUE(tok->token_to_id(t)) << t;
    const auto s = detail::llada_chat_template(*tok, "Hi");
    EXPECT_EQ(s,
              "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    auto ids = tok->encode(s);
    EXPECT_EQ(ids.front(), *tok->token_to_id("<|startoftext|>"));
    EXPECT_EQ(std::count(ids.begin(), ids.end(), *tok->token_to_id("<|eot_id|>")), 1);
}

TEST(Tokenizer, RejectsInvalidUtf8) {
    auto tok = byte_level();
    EXPECT_THROW(tok->encode("bad \xff\xfe bytes"), InputError);
    EXPECT_THROW(tok->encode("overlong \xc0\xaf"), InputError);
    EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));  // surrogate
    EXPECT_EQ(sanitize_utf8("a\xff"), "a\xef\xbf\xbd");
}

TEST(Tokenizer, MatchesHuggingFaceIdForId) {
    const auto golden =
        nlohmann::json::parse(test::read_file(test::data_dir() / "tokenizer_golden.json"));
    int checked = 0;
    for (auto it = golden.begin(); it != golden.end(); ++it) {
        auto tok = Tokenizer::load(test::data_dir() / it.key());
        for (const auto& c : it.value()) {
            const auto text = c["text"].get<std::string>();
            const auto expected = c["ids"].get<std::vector<int32_t>>();
            EXPECT_EQ(tok->encode(text), expected) << it.key() << ": " << text;
            EXPECT_EQ(tok->encode(text, true),
                      c["ids_with_special_tokens"].get<std::vector<int32_t>>())
                << it.key() << " with special tokens: " << text;
            EXPECT_EQ(tok->decode(expected), c.at("decoded").get<std::string>())
                << it.key() << ": " << text;
            ++checked;
        }
    }
    // nine tokenizers: LLaDA-like, Qwen2's, SentencePiece-style BPE (Prepend/Replace and
    // Metaspace), unigram (with and without byte fallback), WordPiece (BERT's pipeline and
    // Whitespace), CacheLens's own; 14 strings each
    EXPECT_GE(checked, 9 * 14);
}

TEST(Tokenizer, TrainedBpeMergesAndRoundTrips) {
    std::vector<std::string> texts;
    for (int i = 0; i < 50; ++i) texts.push_back("the cat sat on the mat with 123 hats");
    auto tok = Tokenizer::from_json_text(train_byte_level_bpe(texts, 300, true), "trained");
    EXPECT_LE(tok->vocab_size(), 300);  // training stops early when no pair repeats
    EXPECT_GT(tok->vocab_size(), 262);
    const std::string s = "the cat sat on the mat with 123 hats";
    auto ids = tok->encode(s);
    EXPECT_LT(ids.size(), s.size() / 2);  // merges shorten the common words
    EXPECT_EQ(tok->decode(ids), s);
    // Digits are isolated: "123" stays three tokens.
    auto digits = tok->encode("123");
    EXPECT_EQ(digits.size(), 3u);
}

TEST(Tokenizer, MalformedFilesGiveClearErrors) {
    auto dir = test::temp_dir("tok");
    auto expect_error = [&](const std::string& content, const std::string& fragment) {
        test::write_file(dir / "tokenizer.json", content);
        try {
            Tokenizer::load(dir / "tokenizer.json");
            FAIL() << "expected an error with '" << fragment << "'";
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        }
    };
    expect_error("{not json", "invalid JSON");
    expect_error(R"({"version":"1.0"})", "no 'model'");
    expect_error(R"({"model":{"type":"WordLevel","vocab":{}}})", "not supported");
    expect_error(R"({"model":{"type":"WordPiece","vocab":{"a":0}}})",
                 "unk_token '[UNK]' is not in the vocab");
    expect_error(R"({"model":{"type":"Unigram","vocab":[["a",-1.0],["b"]]}})",
                 "Unigram vocab entry 1 is not [piece, score]");
    expect_error(R"({"model":{"type":"Unigram","vocab":[["a",-1.0]],"unk_id":3}})",
                 "unk_id 3 is outside the vocab");
    expect_error(
        R"({"model":{"type":"BPE","vocab":{"a":0}},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}}],"special_tokens":{}}})",
        "special token '<s>' that special_tokens does not define");
    expect_error(R"({"model":{"type":"BPE","vocab":{"a":0}},"post_processor":{"type":"Fancy"}})",
                 "post_processor type 'Fancy' is not supported");
    expect_error(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":["a c"]}})",
                 "missing from the vocab");
    expect_error(R"({"model":{"type":"BPE","vocab":{"a":-4}}})", "invalid id");
    expect_error(
        R"({"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(("}}})",
        "invalid split regex");
    expect_error(
        R"({"model":{"type":"BPE","vocab":{"a":0}},"decoder":{"type":"Metaspace","replacement":""}})",
        "replacement is empty");
    expect_error(
        R"({"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":{"type":"Metaspace","prepend_scheme":"sometimes"}})",
        "prepend_scheme 'sometimes'");
    EXPECT_THROW(Tokenizer::load(dir / "missing.json"), InputError);
}

}  // namespace
}  // namespace cl

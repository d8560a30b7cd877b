// libFuzzer harness for tokenizer.json and the text it is given. The first byte picks what the
// rest is: (0) a tokenizer.json to load, then encode and decode a fixed text with; (1) text for the
// embedded model's tokenizer to encode (invalid UTF-8 must be an InputError) and decode again;
// (2) token ids (little-endian i32) for it to decode, special tokens kept or skipped.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/base/assets.h"
#include "engine/base/errors.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

const cl::Tokenizer& embedded_tokenizer() {
    static const auto tokenizer =
        cl::Tokenizer::load(cl::assets_dir() / "models" / "cachelens-tiny" / "tokenizer.json");
    return *tokenizer;
}

void exercise(const cl::Tokenizer& t, std::string_view text) {
    const auto ids = t.encode(text);
    (void)t.encode(text, /*add_special_tokens=*/true);
    const std::string back = t.decode(ids);
    (void)t.decode(ids, /*skip_special=*/true);
    (void)t.pre_tokenize(text);
    if (back.size() > 64 * (text.size() + 16)) __builtin_trap();  // decode cannot explode
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        switch (data[0] % 3) {
            case 0: {
                const auto t = cl::Tokenizer::from_json_text(rest, "fuzz/tokenizer.json");
                exercise(*t, "What is 1 + 2? <|eot_id|> caf\xc3\xa9");
                break;
            }
            case 1:
                exercise(embedded_tokenizer(), rest);
                break;
            default: {
                std::vector<int32_t> ids(rest.size() / 4);
                if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
                (void)embedded_tokenizer().decode(ids);
                (void)embedded_tokenizer().decode(ids, /*skip_special=*/true);
                break;
            }
        }
    } catch (const cl::InputError&) {
    }
    return 0;
}

// Inputs the fuzzers (tests/fuzz, scripts/fuzz) found crashing, checked in under
// tests/data/fuzz/<fuzzer>/, replayed through the same reader: each must now end in an InputError
// naming the file. Plus the same bug class in the other JSON readers: a number nlohmann cannot
// hold ("8e3172") threw out_of_range past the readers' parse_error handlers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "app/cli/sweep_spec.h"
#include "engine/base/errors.h"
#include "engine/model/model.h"
#include "engine/model/safetensors.h"
#include "engine/model/weight_files.h"
#include "engine/tokenizer/tokenizer.h"
#include "test_util.h"

namespace cl {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `read` on `file` and checks it throws an InputError that names `named`.
void expect_input_error(const std::function<void()>& read, const std::string& named,
                        const std::string& what) {
    try {
        read();
        ADD_FAILURE() << what << ": accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << what << ": " << e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": not an InputError: " << e.what();
    }
}

// The readers, as the fuzzers call them: the input is the file at `path` in `dir`.
const std::map<std::string, std::function<void(const fs::path& dir, const std::string& bytes)>>&
readers() {
    static const std::map<std::string, std::function<void(const fs::path&, const std::string&)>> r =
        {
            {"fuzz_weight_index",
             [](const fs::path& dir, const std::string& bytes) {
                 test::write_file(dir / "model-00001-of-00002.safetensors", "x");
                 test::write_file(dir / "model.safetensors.index.json", bytes);
                 expect_input_error([&] { find_weight_files(dir); }, "model.safetensors.index.json",
                                    dir.string());
             }},
            {"fuzz_safetensors",
             [](const fs::path& dir, const std::string& bytes) {
                 test::write_file(dir / "model.safetensors", bytes);
                 expect_input_error([&] { SafetensorsFile::open(dir / "model.safetensors"); },
                                    "model.safetensors", dir.string());
             }},
        };
    return r;
}

TEST(FuzzRegressions, EveryCheckedInCrashIsNowAnInputError) {
    int replayed = 0;
    for (const auto& [fuzzer, read] : readers()) {
        const auto inputs = test::data_dir() / "fuzz" / fuzzer;
        if (!fs::is_directory(inputs)) continue;
        for (const auto& entry : fs::directory_iterator(inputs)) {
            const auto dir = test::temp_dir(fuzzer + "-" + entry.path().stem().string());
            read(dir, read_bytes(entry.path()));
            ++replayed;
        }
    }
    EXPECT_GE(replayed, 1);
}

TEST(FuzzRegressions, ANumberTooLargeForJsonIsAnInputErrorInEveryReader) {
    const std::string huge = "8e3172";
    const auto dir = test::temp_dir("huge");
    // The safetensors header.
    std::string header = "{\"a\": " + huge + "}";
    std::string file(8, '\0');
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    test::write_file(dir / "h.safetensors", file + header);
    expect_input_error([&] { SafetensorsFile::open(dir / "h.safetensors"); }, "h.safetensors",
                       "safetensors header");
    // tokenizer.json.
    expect_input_error(
        [&] { Tokenizer::from_json_text("{\"version\": " + huge + "}", "t/tokenizer.json"); },
        "t/tokenizer.json", "tokenizer.json");
    // config.json of an otherwise valid folder.
    const auto model = test::make_tiny_model("huge-config", 16, 1, 2, 2);
    test::write_file(model / "config.json", "{\"d_model\": " + huge + "}");
    expect_input_error([&] { Model::load(model); }, "config.json", "config.json");
    // A sweep spec.
    test::write_file(dir / "spec.json",
                     "{\"format\": \"cachelens-sweep\", \"seed\": " + huge + "}");
    expect_input_error([&] { cli::load_sweep_spec((dir / "spec.json").string()); }, "spec.json",
                       "sweep spec");
}

}  // namespace
}  // namespace cl

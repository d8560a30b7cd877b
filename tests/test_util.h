// Helpers shared by the test suites: temporary folders and tiny seeded models.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "engine/model/model_writer.h"

namespace cl::test {

// True in the sanitizer builds (scripts/sanitize: GCC defines __SANITIZE_*__, clang answers
// __has_feature). There the instrumented engine runs about 14x slower than in the release build (on
// an AVX2 CPU the product's register tile spills under ASan+UBSan), so the tests that generate
// hundreds of sequences check a fixed part of their cases; the release suite checks them all.
#if defined(__has_feature)
#define CL_TEST_HAS_FEATURE(x) __has_feature(x)
#else
#define CL_TEST_HAS_FEATURE(x) 0
#endif
inline constexpr bool kSanitizedBuild =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    CL_TEST_HAS_FEATURE(address_sanitizer) || CL_TEST_HAS_FEATURE(thread_sanitizer)
    true;
#else
    false;
#endif

inline std::filesystem::path temp_dir(const std::string& name) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // The process id keeps two test runs on one machine (a CI clone beside a checkout) apart.
    auto dir = std::filesystem::path(::testing::TempDir()) / "cachelens-tests" /
               (std::string(info->test_suite_name()) + "." + info->name() + "." + name + "." +
                std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

inline void write_file(const std::filesystem::path& p, const std::string& content) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << content;
}

inline std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A tiny random LLaDA model folder (seeded).
inline std::filesystem::path make_tiny_model(const std::string& name, int64_t d_model = 32,
                                             int64_t layers = 2, int64_t heads = 4,
                                             int64_t kv_heads = 4, uint64_t seed = 7,
                                             StorageDType dtype = StorageDType::F32,
                                             int shards = 1) {
    auto dir = temp_dir(name);
    init_random_model(dir, tiny_config(d_model, layers, heads, kv_heads), seed, dtype, shards);
    return dir;
}

inline std::filesystem::path data_dir() {
    return std::filesystem::path(CL_SOURCE_DIR) / "tests" / "data";
}

}  // namespace cl::test

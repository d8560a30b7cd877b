// Golden tokens of every policy on the shipped default model: 20 task-suite prompts and 3 free-form
// ones, each policy with the shared sampler and (where it has one) with its own decoding, at
// temperature 0 and at temperature 1 with a fixed seed. The file was recorded before the engine
// restructure (issue 14); any change to the engine that alters a generated token fails here.
//
// Re-record (only for a deliberate change, e.g. a new model or RNG; say so in the commit):
//   CL_RECORD_GOLDEN=1 build/bin/cl_engine_tests --gtest_filter='PolicyGolden.*'
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "engine/generation/generator.h"
#include "engine/generation/policy_registry.h"
#include "engine/tasks/task_suite.h"
#include "test_util.h"

namespace cl {
namespace {

constexpr const char* kGoldenFile = "policy_golden.json";

std::vector<std::string> golden_prompts() {
    std::vector<std::string> prompts;
    tasks::TaskGenerator gen(/*seed=*/11, tasks::Split::Eval);
    const char* families[] = {"arith", "reverse", "kv", "arith", "reverse"};
    for (int i = 0; i < 20; ++i) prompts.push_back(gen.next(families[i % 5]).prompt);
    prompts.emplace_back("Hello! Tell me about the sea.");
    prompts.emplace_back("In the beginning");
    prompts.emplace_back("Reverse the list: 3 1 4 1 5 9 2 6 and then add 12 + 30.");
    return prompts;
}

struct GoldenCase {
    std::string key;  // "policy/mode/prompt index/temperature"
    GenerationRequest request;
};

std::vector<GoldenCase> golden_cases() {
    const auto prompts = golden_prompts();
    std::vector<GoldenCase> cases;
    for (const auto& info : list_policies())
        for (const std::string mode : {"shared", "own"}) {
            if (mode == "own" && info.own_decoding.empty()) continue;
            for (size_t i = 0; i < prompts.size(); ++i)
                for (const double temperature : {0.0, 1.0}) {
                    GenerationRequest r;
                    r.prompt_text = prompts[i];
                    r.config.gen_length = 32;
                    r.config.block_length = 16;
                    r.config.steps = 16;
                    r.config.temperature = temperature;
                    r.config.seed = 1234;
                    if (mode == "own") r.config = apply_own_decoding(r.config, info.name);
                    r.policy = info.name;
                    char key[160];
                    std::snprintf(key, sizeof key, "%s/%s/%02zu/t%g", info.name.c_str(),
                                  mode.c_str(), i, temperature);
                    cases.push_back({key, r});
                }
        }
    return cases;
}

// The response part of the final sequence (the prompt is fixed by the case).
std::vector<int32_t> generate_response(const std::shared_ptr<const Model>& model,
                                       const GenerationRequest& request) {
    Generator g(model, request);
    const auto summary = g.run();
    const auto prompt_len = static_cast<size_t>(g.info().prompt_len);
    return {summary.final_tokens.begin() + static_cast<std::ptrdiff_t>(prompt_len),
            summary.final_tokens.end()};
}

TEST(PolicyGolden, EveryPolicyReproducesTheRecordedTokens) {
    const auto dir = default_model_dir();
    ASSERT_FALSE(dir.empty()) << "assets/models/cachelens-tiny is part of the repository";
    auto model = Model::load(dir);
    const auto cases = golden_cases();
    ASSERT_GE(cases.size(), size_t{10 * 23 * 2}) << "every policy, 23 prompts, 2 temperatures";
    const auto path = test::data_dir() / kGoldenFile;

    if (std::getenv("CL_RECORD_GOLDEN")) {
        nlohmann::json out;
        out["model_hash"] = model->content_hash();
        for (const auto& c : cases) out["cases"][c.key] = generate_response(model, c.request);
        std::ofstream(path) << out.dump(0) << "\n";
        GTEST_SKIP() << "recorded " << cases.size() << " cases into " << path;
    }
    const auto golden = nlohmann::json::parse(test::read_file(path));
    ASSERT_EQ(golden["model_hash"].get<std::string>(), model->content_hash())
        << "the default model changed: re-record " << path;
    ASSERT_EQ(golden["cases"].size(), cases.size()) << "cases were added or removed: re-record";
    int mismatches = 0, greedy_mismatches = 0, checked = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const auto& c = cases[i];
        ASSERT_TRUE(golden["cases"].contains(c.key)) << c.key;
        // Sanitizer builds: a quarter of the cases, every policy and mode at both temperatures
        // (the cases run through the temperatures fastest, then the prompts; 23 prompts a mode, so
        // each mode gets another five or six of them).
        if (test::kSanitizedBuild && (i / 2) % 4 != 0) continue;
        ++checked;
        const auto expected = golden["cases"][c.key].get<std::vector<int32_t>>();
        const auto got = generate_response(model, c.request);
        if (got == expected) continue;
        greedy_mismatches += c.request.config.temperature == 0;
        if (++mismatches <= 10) ADD_FAILURE() << c.key << ": tokens differ";
    }
    EXPECT_EQ(mismatches, 0) << "of " << checked << " cases checked, " << greedy_mismatches
                             << " at temperature 0";
}

// The same cases on a CUDA device, fp32 weights: every policy must give the CPU's tokens (the
// golden file is the CPU's), at temperature 0 and with the counter-based noise at temperature 1.
// Skips, saying why, where LibTorch has no CUDA or no GPU is present.
TEST(PolicyGolden, EveryPolicyGivesTheCpuTokensOnACudaDevice) {
    if (const auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    const auto dir = default_model_dir();
    ASSERT_FALSE(dir.empty());
    LoadOptions on_gpu;
    on_gpu.device = "cuda";
    on_gpu.dtype = "fp32";  // the criterion: the same tokens in fp32
    auto model = Model::load(dir, on_gpu);
    ASSERT_EQ(model->device(), "cuda:0");
    const auto golden = nlohmann::json::parse(test::read_file(test::data_dir() / kGoldenFile));
    ASSERT_EQ(golden["model_hash"].get<std::string>(), model->content_hash());
    int mismatches = 0, runs = 0;
    for (const auto& c : golden_cases()) {
        const auto expected = golden["cases"][c.key].get<std::vector<int32_t>>();
        ++runs;
        if (generate_response(model, c.request) == expected) continue;
        if (++mismatches <= 10) ADD_FAILURE() << c.key << ": tokens differ from the CPU's";
    }
    EXPECT_EQ(mismatches, 0) << "of " << runs << " cases";
}

}  // namespace
}  // namespace cl

// The shipped default model: it loads from assets/models/, and a fixed prompt and seed produce the
// recorded output (tests/data/default_model_golden.json, written by scripts/make-golden after the
// model was trained). A changed model must come with a re-recorded golden file.
#include <nlohmann/json.hpp>

#include "engine/generation/generator.h"
#include "test_util.h"

namespace cl {
namespace {

TEST(DefaultModel, LoadsAndReproducesTheRecordedOutput) {
    const auto dir = default_model_dir();
    ASSERT_FALSE(dir.empty()) << "assets/models/cachelens-tiny is part of the repository";
    auto model = Model::load(dir);
    EXPECT_EQ(model->config().n_layers, 6);
    const auto golden =
        nlohmann::json::parse(test::read_file(test::data_dir() / "default_model_golden.json"));
    EXPECT_EQ(golden["model_hash"].get<std::string>(), model->content_hash())
        << "re-run scripts/make-golden";
    for (const auto& c : golden["cases"]) {
        GenerationRequest r;
        r.prompt_text = c["prompt"].get<std::string>();
        r.config.gen_length = c["gen_length"].get<int64_t>();
        r.config.block_length = c["block_length"].get<int64_t>();
        r.config.steps = c["steps"].get<int64_t>();
        r.config.temperature = c["temperature"].get<double>();
        r.config.seed = c["seed"].get<uint64_t>();
        r.policy = c["policy"].get<std::string>();
        Generator g(model, r);
        const auto s = g.run();
        EXPECT_EQ(s.final_tokens, c["tokens"].get<std::vector<int32_t>>()) << r.prompt_text;
    }
}

}  // namespace
}  // namespace cl

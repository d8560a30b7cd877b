// The shipped default model: it loads from assets/models/, and a fixed prompt and seed produce the
// recorded output (tests/data/default_model_golden.json, written by scripts/make-golden after the
// model was trained). A changed model must come with a re-recorded golden file.
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "engine/base/assets.h"
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

// The embedded Dream-architecture model (assets/models/cachelens-tiny-dream): grouped-query
// attention and shifted logits, and trained: at its generation defaults it solves eval items of
// both families (its card reports 150 items per family, 89% and 87%; 10 here keep the suite fast,
// and a broken shift or conversion solves none of them).
TEST(DefaultModel, TheEmbeddedDreamModelIsTrained) {
    const auto dir = assets_dir() / "models" / "cachelens-tiny-dream";
    ASSERT_TRUE(std::filesystem::exists(dir / "config.json"))
        << dir << " is part of the repository";
    const auto model = Model::load(dir);
    EXPECT_EQ(model->config().architecture, "dream");
    EXPECT_EQ(model->config().logits_shift, 1);
    EXPECT_LT(model->config().n_kv_heads, model->config().n_heads);
    const auto out = test::temp_dir("dream-eval") / "eval.json";
    // 10 items a task (4 in the sanitizer builds, where the instrumented CLI runs 15x slower);
    // at least 70% of them right.
    const int items = test::kSanitizedBuild ? 4 : 10;
    const auto r =
        test::cli("eval --model " + dir.string() + " --tasks arith,reverse --items " +
                  std::to_string(items) + " --policies none --threads 1 --json " + out.string());
    ASSERT_EQ(r.code, 0) << r.out;
    const auto rows = nlohmann::json::parse(test::read_file(out));
    ASSERT_EQ(rows.size(), 2u);
    for (const auto& row : rows) EXPECT_GE(row["correct"].get<int>() * 10, items * 7) << row.dump();
}

// `--fresh-prefix system` keeps the chat template's system turn fresh: 20 rows on the embedded
// Dream model (the rows it keeps state in; docs/performance.md), none on LLaDA, whose template has
// no system turn, and none on a prompt encoded without the template. The run records the resolved
// count.
TEST(DefaultModel, TheSystemTurnIsTheDreamModelsFirstTwentyRows) {
    const auto dream = Model::load(assets_dir() / "models" / "cachelens-tiny-dream");
    const auto llada = Model::load(default_model_dir());
    auto rows = [](const Model& m, bool templ) {
        const std::string q = "What is 002 + 091?";
        return m.system_turn_rows(m.tokenizer().encode(templ ? m.apply_chat_template(q) : q));
    };
    EXPECT_EQ(rows(*dream, true), 20);
    EXPECT_EQ(rows(*dream, false), 0);
    EXPECT_EQ(rows(*llada, true), 0);
    GenerationRequest r;
    r.prompt_text = "What is 002 + 091?";
    r.config.gen_length = 8;
    r.config.block_length = 8;
    r.config.steps = 8;
    r.config.fresh_prefix = GenerationConfig::kSystemTurn;
    r.policy = "fast-prefix";
    Generator g(dream, r, nullptr);
    EXPECT_EQ(g.info().sampler.at("fresh_prefix"), "20");
}

}  // namespace
}  // namespace cl

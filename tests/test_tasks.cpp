#include <regex>
#include <set>

#include "engine/base/stats.h"
#include "engine/model/model.h"
#include "engine/tasks/task_suite.h"
#include "engine/training/trainer.h"
#include "test_util.h"

namespace cl::tasks {
namespace {

TEST(Tasks, ArithmeticAnswersAreCorrectSums) {
    TaskGenerator g(1, Split::Train);
    std::regex q(R"(What is (\d+) \+ (\d+)\?)");
    for (int i = 0; i < 200; ++i) {
        auto item = g.next("arith");
        std::smatch m;
        ASSERT_TRUE(std::regex_match(item.prompt, m, q)) << item.prompt;
        EXPECT_EQ(m[1].length(), 3u) << "operands are zero padded to the same width";
        EXPECT_EQ(m[2].length(), 3u);
        EXPECT_EQ(item.answer, std::to_string(std::stoll(m[1]) + std::stoll(m[2])));
        EXPECT_EQ(extract_answer(item.response), item.answer);
    }
}

TEST(Tasks, KeyValueAnswerIsInThePromptFarBackForEval) {
    TaskGenerator g(2, Split::Eval, Difficulty{3, 12, 24, 3, 8});
    for (int i = 0; i < 100; ++i) {
        auto item = g.next("kv");
        const auto start = item.prompt.rfind("What is ") + 8;
        const auto key = item.prompt.substr(start, item.prompt.find('?', start) - start);
        const auto pos = item.prompt.find(" " + key + "=" + item.answer);
        ASSERT_NE(pos, std::string::npos) << item.prompt;
        EXPECT_EQ(item.prompt.find(" " + key + "="), pos) << "each key appears once in the list";
        EXPECT_LT(pos, item.prompt.size() / 2) << "eval keys sit in the first part of the prompt";
    }
}

TEST(Tasks, ReversalAndExtraction) {
    TaskGenerator g(3, Split::Train);
    auto item = g.next("reverse");
    EXPECT_TRUE(exact_match(item, item.response));
    EXPECT_FALSE(exact_match(item, "Answer: nope"));
    EXPECT_EQ(extract_answer("steps. Answer: 42."), "42");
    EXPECT_EQ(extract_answer("Answer: 1 Answer:  7 8 \nmore"), "7 8");
    EXPECT_EQ(extract_answer("no answer here"), "");
    EXPECT_THROW(g.next("poetry"), std::invalid_argument);
}

// A prompt written as a task item is recognised with the item's answer, computed from the prompt
// alone; any other text is not (the app checks typed and example prompts with this).
TEST(Tasks, TaskPromptsAreRecognisedWithTheirAnswers) {
    for (const std::string family : {"arith", "reverse", "kv"}) {
        TaskGenerator g(5, Split::Eval);
        for (int i = 0; i < 100; ++i) {
            const auto item = g.next(family);
            const auto got = recognise_task_prompt(item.prompt);
            ASSERT_TRUE(got.has_value()) << item.prompt;
            EXPECT_EQ(got->family, family);
            EXPECT_EQ(got->answer, item.answer) << item.prompt;
        }
    }
    EXPECT_EQ(recognise_task_prompt("What is 99999999999999999999 + 1?")->answer,
              "100000000000000000000");
    EXPECT_EQ(recognise_task_prompt("What is 000 + 000?")->answer, "0");
    for (const std::string other :
         {"", "What is 1 + ?", "what is 1 + 2?", "What is 1 + 2? Be brief.",
          "Reverse the list: 12 3", "Remember: king=417. What is sea?", "Continue: In the"})
        EXPECT_FALSE(recognise_task_prompt(other).has_value()) << other;
}

TEST(Tasks, PairedExactTestOfFixedAndBrokenItems) {
    // By hand: 3 vs 8 discordant items -> 2 * (1 + 11 + 55 + 165) / 2^11.
    EXPECT_NEAR(stats::paired_exact_p(3, 8), 2.0 * 232 / 2048, 1e-12);
    EXPECT_NEAR(stats::paired_exact_p(8, 3), 2.0 * 232 / 2048, 1e-12);  // symmetric
    EXPECT_NEAR(stats::paired_exact_p(0, 10), 2.0 / 1024, 1e-12);
    EXPECT_DOUBLE_EQ(stats::paired_exact_p(5, 5), 1.0);  // capped
    EXPECT_DOUBLE_EQ(stats::paired_exact_p(0, 0), 1.0);  // no discordant item: no evidence
    EXPECT_LT(stats::paired_exact_p(0, 400), 1e-100);    // large n stays finite
}

TEST(Tasks, TrainAndEvalSplitsAreDisjoint) {
    std::set<std::string> train;
    TaskGenerator t(5, Split::Train), e(5, Split::Eval);
    for (int i = 0; i < 3000; ++i) train.insert(t.next("arith").prompt);
    for (int i = 0; i < 300; ++i) EXPECT_EQ(train.count(e.next("arith").prompt), 0u);
}

TEST(Tasks, DeterministicForASeed) {
    TaskGenerator a(9, Split::Train), b(9, Split::Train);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(a.next("kv").prompt, b.next("kv").prompt);
}

TEST(Stats, MedianAndWilsonInterval) {
    EXPECT_DOUBLE_EQ(stats::median({5, 1, 3}), 3);
    EXPECT_DOUBLE_EQ(stats::median({4, 1, 3, 2}), 2.5);  // mean of the two middle values
    EXPECT_DOUBLE_EQ(stats::median({}), 0);
    // 8 of 10: Wilson 95% interval 0.490-0.943 (Newcombe 1998, table I).
    const auto [low, high] = stats::wilson_interval(8, 10);
    EXPECT_NEAR(low, 0.4902, 1e-4);
    EXPECT_NEAR(high, 0.9433, 1e-4);
    const auto [zero_low, zero_high] = stats::wilson_interval(0, 0);
    EXPECT_EQ(zero_low, 0.0);
    EXPECT_EQ(zero_high, 1.0);
}

TEST(Trainer, LowersTheLossOfAMicroModelInSeconds) {
    auto dir = test::temp_dir("train");
    TrainOptions o;
    o.out_dir = dir;
    o.shape = tiny_config(32, 2, 2, 2);
    o.shape.mlp_hidden_size = 64;
    o.shape.max_sequence_length = 512;
    o.vocab_size = 300;
    o.total_steps = 60;
    o.batch_size = 8;
    o.lr = 3e-3;
    o.warmup_steps = 5;
    o.eval_every = 30;
    o.checkpoint_every = 30;
    o.log_every = 10;
    o.mixture = {{"reverse", 1.0}};
    o.response_pad = 8;
    std::vector<double> losses;
    o.on_progress = [&](const TrainProgress& p) { losses.push_back(p.loss); };
    auto r = train_model(o);
    ASSERT_GE(losses.size(), 3u);
    EXPECT_LT(losses.back(), losses.front() * 0.8)
        << "loss " << losses.front() << " -> " << losses.back();
    EXPECT_TRUE(r.finished);
    // The folder is a loadable model and the checkpoint resumes.
    auto m = Model::load(dir);
    EXPECT_EQ(m->config().d_model, 32);
    o.resume = true;
    o.total_steps = 70;
    auto r2 = train_model(o);
    EXPECT_EQ(r2.steps_done, 70);
    // A warm start from the finished folder keeps its tokenizer and weights' shapes.
    TrainOptions w = o;
    w.resume = false;
    w.init_from = dir;
    w.out_dir = test::temp_dir("warm");
    w.total_steps = 5;
    w.vocab_size = 999;  // ignored: the tokenizer comes from init_from
    train_model(w);
    EXPECT_EQ(test::read_file(w.out_dir / "tokenizer.json"),
              test::read_file(dir / "tokenizer.json"));
    EXPECT_EQ(Model::load(w.out_dir)->config().d_model, 32);
}

}  // namespace
}  // namespace cl::tasks

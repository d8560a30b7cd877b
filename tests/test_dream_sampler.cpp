// Dream's decoding options (its diffusion_generate): the transfer schedule int(n (1 - s/t)) over
// linspace(1, 1e-3, T + 1), origin's independent commits with probability 1 - s/t, top-p and top-k
// filters, the topk_margin and entropy confidences, alg_temp's position draws; and every policy's
// invariants under them on the Dream architecture.
#include <cmath>

#include "engine/base/errors.h"
#include "engine/generation/generator.h"
#include "engine/generation/sampler.h"
#include "engine/trace/trace_store.h"
#include "policy_run.h"
#include "test_util.h"

namespace cl {
namespace {

std::shared_ptr<Model> dream() {
    static std::shared_ptr<Model> m = [] {
        ModelConfig c = tiny_config(48, 2, 6, 2);
        set_architecture(c, "dream");
        const auto dir = test::temp_dir("dream-sampler");
        init_random_model(dir, c, /*seed=*/21);
        return Model::load(dir);
    }();
    return m;
}

std::vector<std::shared_ptr<const trace::StepRecord>> run(const GenerationConfig& c,
                                                          const std::string& policy = "none") {
    GenerationRequest r;
    r.prompt_text = "Reverse the list: 4 1 7 2";
    r.config = c;
    r.policy = policy;
    trace::TraceStore store;
    Generator g(dream(), r, &store);
    g.run();
    return store.steps(0);
}

TEST(DreamSampler, TheScheduleIsDreamsFormula) {
    // timesteps 1, 0.75025, 0.5005, 0.25075, 0.001: 32 (1 - 0.75025) = 7.99 -> 7; 25 (1 -
    // 0.5005 / 0.75025) = 8.32 -> 8; 17 (1 - 0.25075 / 0.5005) = 8.48 -> 8; the rest (9) last.
    const std::vector<float> f = dream_transfer_fractions(4);
    ASSERT_EQ(f.size(), 4u);
    EXPECT_EQ(dream_transfer_count(32, f[0]), 7);
    EXPECT_EQ(dream_transfer_count(25, f[1]), 8);
    EXPECT_EQ(dream_transfer_count(17, f[2]), 8);
    EXPECT_EQ(dream_transfer_count(9, f[3]), 9);
    EXPECT_NEAR(f[0], 0.24975, 1e-6);
    EXPECT_EQ(f[3], 1.0F);

    GenerationConfig c = test::policy_test_config(32, 32, 4);
    c.schedule = TransferSchedule::Dream;
    const auto steps = run(c);
    ASSERT_EQ(steps.size(), 4u);
    std::vector<size_t> counts;
    for (const auto& s : steps) counts.push_back(s->committed.size());
    EXPECT_EQ(counts, (std::vector<size_t>{7, 8, 8, 9}));
}

TEST(DreamSampler, OriginCommitsEachMaskWithProbabilityOneMinusSOverT) {
    GenerationConfig c = test::policy_test_config(32, 32, 4);
    c.schedule = TransferSchedule::Dream;
    c.remasking = Remasking::Random;  // Dream's origin
    c.seed = 3;
    const auto steps = run(c);
    ASSERT_EQ(steps.size(), 4u);
    const int64_t P = steps[0]->seq_len - 32;
    std::vector<bool> masked(32, true);
    size_t total = 0;
    for (int32_t t = 0; t < 4; ++t) {
        const double bar = 1.0 - dream_transfer_fractions(4)[static_cast<size_t>(t)];
        std::vector<int32_t> expected;
        for (int64_t i = 0; i < 32; ++i)
            if (masked[static_cast<size_t>(i)] && detail::remask_uniform(c.seed, t, P + i) >= bar)
                expected.push_back(static_cast<int32_t>(P + i));
        auto got = steps[static_cast<size_t>(t)]->committed;
        std::sort(got.begin(), got.end());
        EXPECT_EQ(got, expected) << "step " << t;
        for (int32_t p : got) masked[static_cast<size_t>(p - P)] = false;
        total += got.size();
    }
    EXPECT_EQ(total, 32u);
}

// Probabilities 0.5, 0.3, 0.15, 0.05 over four tokens.
torch::Tensor four_token_logits() {
    return torch::log(torch::tensor({0.5, 0.3, 0.15, 0.05}, torch::kFloat32)).unsqueeze(0);
}

detail::Predictions sample_with(const GenerationConfig& c, const torch::Tensor& logits,
                                int32_t step = 0) {
    detail::SamplerInputs in;
    in.cfg = &c;
    in.step = step;
    in.top_k = 4;
    return detail::sample(logits, {7}, in);
}

TEST(DreamSampler, TopPAndTopKFilterTheDistributionButNotTheInspectorsView) {
    GenerationConfig c;
    c.top_p = 0.7;  // 0.5 < 0.7 keeps the second token; 0.8 > 0.7 drops the third and fourth
    auto p = sample_with(c, four_token_logits());
    EXPECT_EQ(p.token[0], 0);
    EXPECT_NEAR(p.confidence[0], 0.5 / 0.8, 1e-6);  // float32 logits
    EXPECT_NEAR(p.topk_probs[0], 0.5, 1e-6);        // the inspector shows the model's distribution
    EXPECT_NEAR(p.topk_probs[3], 0.05, 1e-6);

    GenerationConfig k;
    k.top_k = 3;
    EXPECT_NEAR(sample_with(k, four_token_logits()).confidence[0], 0.5 / 0.95, 1e-6);

    // Sampled at a high temperature, only the kept tokens ever come out.
    GenerationConfig hot;
    hot.temperature = 5.0;
    hot.top_k = 2;
    std::set<int32_t> seen;
    for (int32_t step = 0; step < 200; ++step)
        seen.insert(sample_with(hot, four_token_logits(), step).token[0]);
    EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
}

TEST(DreamSampler, MarginAndEntropyConfidences) {
    GenerationConfig margin;
    margin.remasking = Remasking::TopkMargin;
    EXPECT_NEAR(sample_with(margin, four_token_logits()).confidence[0], 0.5 - 0.3, 1e-6);
    GenerationConfig entropy;
    entropy.remasking = Remasking::Entropy;
    double neg_h = 0;
    for (double q : {0.5, 0.3, 0.15, 0.05}) neg_h += q * std::log(q);
    EXPECT_NEAR(sample_with(entropy, four_token_logits()).confidence[0], neg_h, 1e-6);
    EXPECT_EQ(parse_remasking("maskgit_plus"), Remasking::LowConfidence);
    EXPECT_EQ(parse_remasking("origin"), Remasking::Random);
    EXPECT_EQ(parse_remasking("topk_margin"), Remasking::TopkMargin);
}

std::vector<std::vector<int32_t>> commits(const GenerationConfig& c) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& s : run(c)) {
        out.push_back(s->committed);
        std::sort(out.back().begin(), out.back().end());  // the set, not the ranking
    }
    return out;
}

TEST(DreamSampler, AlgTempDrawsPositionsReproduciblyAndVanishesAsItGoesToZero) {
    GenerationConfig c = test::policy_test_config(32, 32, 8);
    c.schedule = TransferSchedule::Dream;
    c.remasking = Remasking::Entropy;
    const auto greedy = commits(c);
    // A random model's entropies differ by ~1e-8 at least; divided by 1e-12 they dwarf the
    // Gumbel noise (< 40).
    c.alg_temp = 1e-12;
    EXPECT_EQ(commits(c), greedy);
    c.alg_temp = 2.0;
    const auto drawn = commits(c);
    EXPECT_NE(drawn, greedy);
    EXPECT_EQ(commits(c), drawn);  // counter-based draws: the same run again
    c.seed = 1;
    EXPECT_NE(commits(c), drawn);
}

TEST(DreamSampler, EveryPolicyAtItsConservativeSettingsEqualsTheBaselineUnderDreamsSampler) {
    GenerationConfig c = test::policy_test_config();
    c.schedule = TransferSchedule::Dream;
    c.remasking = Remasking::Entropy;
    c.top_p = 0.9;
    c.top_k = 50;
    c.temperature = 0.5;
    c.alg_temp = 0.5;
    c.seed = 4;
    for (const auto& [policy, params] : test::conservative_settings())
        test::expect_same_as_baseline(dream(), policy, params, c);
}

TEST(DreamSampler, BadSettingsAreRefusedNamingTheSetting) {
    GenerationConfig c = test::policy_test_config();
    auto refused = [&](const char* setting) {
        try {
            c.validate(4096, 10);
            ADD_FAILURE() << setting << " accepted";
        } catch (const InputError& e) {
            EXPECT_EQ(e.setting(), setting) << e.what();
        }
        c = test::policy_test_config();
    };
    c.top_p = 0.0;
    refused("top_p");
    c.top_p = 1.5;
    refused("top_p");
    c.top_k = -1;
    refused("top_k");
    c.alg_temp = std::nan("");
    refused("alg_temp");
    c.fresh_prefix = 11;  // longer than the 10-token prompt
    refused("fresh_prefix");
    c.fresh_prefix = -2;
    refused("fresh_prefix");
    EXPECT_THROW(parse_transfer_schedule("cosine"), InputError);
    EXPECT_EQ(parse_fresh_prefix("system"), GenerationConfig::kSystemTurn);
    EXPECT_EQ(parse_fresh_prefix("20"), 20);
    for (const char* bad : {"", "-1", "20x", "System", "1e3"}) {
        try {
            parse_fresh_prefix(bad);
            ADD_FAILURE() << "'" << bad << "' accepted";
        } catch (const InputError& e) {
            EXPECT_EQ(e.setting(), "fresh_prefix") << e.what();
        }
    }
}

}  // namespace
}  // namespace cl

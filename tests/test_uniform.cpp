// Uniform-noise diffusion (docs/uniform-noise.md): the noise process as a model property, the
// sampler that starts from random tokens and revises them inside the active block, the block
// cache against the full forward, and the drift probe against K/V computed independently.
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "engine/base/errors.h"
#include "engine/generation/generator.h"
#include "engine/generation/policy_registry.h"
#include "engine/model/transformer.h"
#include "engine/trace/metrics.h"
#include "engine/trace/trace_store.h"
#include "test_util.h"

namespace cl {
namespace {

// A tiny random model folder whose config says `noise`.
std::filesystem::path model_dir(const std::string& noise) {
    auto dir = test::make_tiny_model("uniform-" + noise, 48, 3, 4, 2, 5);
    auto cfg = nlohmann::json::parse(test::read_file(dir / "config.json"));
    cfg["noise_process"] = noise;
    test::write_file(dir / "config.json", cfg.dump(2));
    return dir;
}

std::shared_ptr<Model> uniform_model() {
    static std::shared_ptr<Model> m = Model::load(model_dir("uniform"));
    return m;
}

struct UniformRun {
    trace::RunInfo info;
    trace::RunSummary summary;
    trace::StepList steps;
};

UniformRun run(const std::string& policy, std::map<std::string, double> params = {},
               uint64_t seed = 3, bool drift = false, bool oracle = false) {
    GenerationRequest r;
    r.prompt_text = "What is 12 + 34?";
    r.config.gen_length = 32;
    r.config.block_length = 16;
    r.config.steps = 16;
    r.config.seed = seed;
    r.policy = policy;
    r.params = std::move(params);
    trace::TraceStore store;
    store.set_want_drift(drift);
    store.set_want_oracle(oracle);
    Generator g(uniform_model(), r, &store);
    UniformRun out;
    out.info = g.info();
    out.summary = g.run();
    out.steps = store.steps(0);
    return out;
}

TEST(UniformNoise, TheConfigNamesTheNoiseProcess) {
    EXPECT_EQ(load_model_config(model_dir("masked")).noise_process, NoiseProcess::Masked);
    const auto c = load_model_config(model_dir("uniform"));
    EXPECT_EQ(c.noise_process, NoiseProcess::Uniform);
    EXPECT_NE(c.to_json().find("\"noise_process\": \"uniform\""), std::string::npos);
    const auto bad = model_dir("absorbing");
    try {
        load_model_config(bad);
        FAIL() << "an unknown noise process must be refused";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("absorbing"), std::string::npos) << e.what();
    }
}

TEST(UniformNoise, ThePriorCoversEveryTokenButTheMaskEvenly) {
    std::mt19937_64 rng(11);
    std::vector<int> counts(10, 0);
    const int n = 90000;
    for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(uniform_noise_token(rng(), 10, 3))];
    EXPECT_EQ(counts[3], 0);
    for (int id = 0; id < 10; ++id)
        if (id != 3) {
            EXPECT_NEAR(counts[static_cast<size_t>(id)], n / 9, 400) << id;
        }
    EXPECT_EQ(uniform_noise_token(8, 10, 9), 8);  // the last id when the mask is the last one
    EXPECT_EQ(uniform_noise_token(0, 10, 0), 1);
}

TEST(UniformNoise, TheResponseStartsAsSeededNoiseWithoutMasks) {
    const auto a = run("none", {}, 3), b = run("none", {}, 3), c = run("none", {}, 4);
    const auto P = static_cast<size_t>(a.info.prompt_len);
    EXPECT_EQ(a.info.noise_process, "uniform");
    EXPECT_EQ(a.info.initial_tokens, b.info.initial_tokens);
    EXPECT_NE(a.info.initial_tokens, c.info.initial_tokens);
    std::set<int32_t> distinct;
    for (size_t i = P; i < a.info.initial_tokens.size(); ++i) {
        const int32_t t = a.info.initial_tokens[i];
        EXPECT_NE(t, a.info.mask_id);
        EXPECT_GE(t, 0);
        distinct.insert(t);
    }
    EXPECT_GT(distinct.size(), 20u) << "32 draws from ~1000 ids are mostly distinct";
    for (int32_t t : a.summary.final_tokens) EXPECT_NE(t, a.info.mask_id);
}

TEST(UniformNoise, StepsChangeOnlyTheActiveBlockAndFinishedBlocksStayFixed) {
    const auto r = run("none");
    std::vector<int32_t> before = r.info.initial_tokens;
    int changes = 0;
    for (const auto& s : r.steps) {
        const int32_t start = r.info.prompt_len + s->block * r.info.block_len;
        for (int32_t c : s->committed) {
            EXPECT_GE(c, start);
            EXPECT_LT(c, start + r.info.block_len);
            EXPECT_NE(s->tokens[static_cast<size_t>(c)], before[static_cast<size_t>(c)])
                << "an update changes the token";
            ++changes;
        }
        for (size_t i = 0; i < before.size(); ++i)
            if (std::find(s->committed.begin(), s->committed.end(), static_cast<int32_t>(i)) ==
                s->committed.end()) {
                EXPECT_EQ(s->tokens[i], before[i]) << "step " << s->step << " row " << i;
            }
        before = s->tokens;
    }
    EXPECT_GE(changes, r.info.gen_len) << "every noise token is replaced at least once";
    EXPECT_LE(r.steps.size(), 16u) << "the per-block budget bounds the steps";
}

TEST(UniformNoise, ConservativeBlockCacheEqualsTheBaseline) {
    const auto base = run("none");
    const auto cached = run("block-cache", {{"refresh_interval", 1}});
    EXPECT_EQ(cached.summary.final_tokens, base.summary.final_tokens);
    const auto reused = run("block-cache", {{"refresh_interval", 0}});
    int partial = 0;
    for (const auto& s : reused.steps) {
        if (s->step_in_block == 0) continue;
        const int32_t start = reused.info.prompt_len + s->block * reused.info.block_len;
        for (int32_t i = 0; i < s->seq_len; ++i) {
            const bool in_block = i >= start && i < start + reused.info.block_len;
            EXPECT_EQ(s->action(1, i) == trace::RowAction::Recomputed, in_block) << i;
        }
        ++partial;
    }
    EXPECT_GT(partial, 0);
}

// Issue #20: the existing policies run on uniform-noise models wherever their logic applies, each
// with its oracle staleness: every registered policy finishes, never writes [MASK] into the
// response, and the oracle measures every step (zero for the uncached baseline).
TEST(UniformNoise, EveryPolicyRunsWithItsOracle) {
    const auto mask_id = static_cast<int32_t>(uniform_model()->config().mask_token_id);
    for (const auto& p : list_policies()) {
        const auto r = run(p.name, {}, 3, false, /*oracle=*/true);
        ASSERT_FALSE(r.steps.empty()) << p.name;
        EXPECT_EQ(r.summary.status, trace::RunStatus::Complete) << p.name;
        for (int32_t i = r.info.prompt_len; i < r.info.seq_len(); ++i)
            EXPECT_NE(r.summary.final_tokens[static_cast<size_t>(i)], mask_id) << p.name << i;
        double kl = 0;
        for (const auto& s : r.steps) {
            ASSERT_TRUE(s->has_oracle) << p.name << " step " << s->step;
            kl += s->oracle.logits_kl;
        }
        if (p.name == "none") {
            EXPECT_NEAR(kl, 0.0, 1e-9);
        }
        EXPECT_TRUE(std::isfinite(kl)) << p.name;
    }
}

// Every layer's K/V of a full forward over `ids`.
std::vector<detail::LayerCache> full_kv(const std::vector<int32_t>& ids) {
    struct Full final : detail::LayerHooks {
        detail::LayerPlan plan(int) override { return {}; }
    } hooks;
    const auto& net = uniform_model()->net();
    auto cache = net.make_cache(static_cast<int64_t>(ids.size()), false);
    auto t = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()));
    detail::RowSet rows;
    c10::InferenceMode guard;
    net.forward_plan(t, hooks, cache, rows);
    return cache;
}

TEST(DriftProbe, NoneMeasuresTheStepToStepChangeOfEveryRow) {
    const auto r = run("none", {}, 3, true);
    ASSERT_GE(r.steps.size(), 3u);
    std::vector<int32_t> input_prev = r.info.initial_tokens;  // input of step 0
    for (size_t s = 0; s < 3; ++s) {
        const auto& rec = *r.steps[s];
        ASSERT_TRUE(rec.has_drift);
        if (s == 0) {  // nothing computed before the first step
            for (float v : rec.drift.k_cos) EXPECT_TRUE(std::isnan(v));
            continue;
        }
        const auto& input_now = r.steps[s - 1]->tokens;
        const auto before = full_kv(input_prev), now = full_kv(input_now);
        const int64_t L = rec.seq_len;
        for (int l = 0; l < rec.n_layers; ++l) {
            auto a =
                now[static_cast<size_t>(l)].k.transpose(0, 1).reshape({L, -1}).to(torch::kDouble);
            auto b = before[static_cast<size_t>(l)].k.transpose(0, 1).reshape({L, -1}).to(
                torch::kDouble);
            auto cos = torch::cosine_similarity(a, b, 1);
            for (int64_t i = 0; i < L; ++i)
                EXPECT_NEAR(rec.drift.k_cos[static_cast<size_t>(l * L + i)], cos[i].item<double>(),
                            1e-5)
                    << "step " << s << " layer " << l << " row " << i;
        }
        input_prev = input_now;
    }
}

TEST(DriftProbe, RowsACachePolicyReusesAreNotMeasured) {
    const auto r = run("block-cache", {{"refresh_interval", 0}}, 3, true);
    int reused = 0;
    for (const auto& s : r.steps) {
        if (!s->has_drift) continue;
        for (size_t i = 0; i < s->actions.size(); ++i)
            if (s->actions[i] == trace::RowAction::KvReused) {
                EXPECT_TRUE(std::isnan(s->drift.k_cos[i]));
                ++reused;
            }
    }
    EXPECT_GT(reused, 0);
}

}  // namespace
}  // namespace cl

// Architectures are plug-ins: this file adds one that exists only in the tests (LLaDA's blocks with
// q/k/v biases and shifted logits, i.e. row i predicts token i+1 as in AR-adapted models like
// Dream) without touching the generator or any policy, and checks that the engine serves it: the
// table finds it by model_type, the biases are loaded and used, a plan forward with every row and a
// partial forward over a fresh cache equal the full forward, and the sampler reads position i's
// prediction from row i-1 under every policy.
#include <cmath>

#include "engine/base/errors.h"
#include "engine/generation/generator.h"
#include "engine/generation/policy_registry.h"
#include "engine/model/arch_llada.h"
#include "engine/model/transformer.h"
#include "engine/trace/trace_store.h"
#include "plan_test_util.h"
#include "test_util.h"

namespace cl {
namespace {

constexpr const char* kTestType = "cachelens-test-shifted";

detail::Architecture shifted_biased_architecture() {
    detail::Architecture a = detail::llada_architecture();
    a.name = "test-shifted-biased";
    a.model_types = {kTestType};
    a.hf_classes = {"CacheLensTestShiftedLM"};
    a.logits_shift = 1;
    a.read_config = [](const nlohmann::json& j, const std::filesystem::path& file) {
        auto c = detail::read_llada_config(j, file);
        c.qkv_bias = true;  // always, whatever the file says
        return c;
    };
    a.write_config = [](const ModelConfig& c) {
        auto j = detail::write_llada_config(c);
        j["model_type"] = kTestType;
        j["architectures"] = {"CacheLensTestShiftedLM"};
        return j;
    };
    return a;
}

std::shared_ptr<Model> shifted_model() {
    static std::shared_ptr<Model> m = [] {
        detail::register_architecture(shifted_biased_architecture());
        ModelConfig c = tiny_config(48, 3, 4, 2);
        c.architecture = "test-shifted-biased";
        c.model_type = kTestType;
        c.qkv_bias = true;
        const auto dir = test::temp_dir("shifted-model");
        init_random_model(dir, c, /*seed=*/5);
        return Model::load(dir);
    }();
    return m;
}

using test::nmse;

TEST(Architecture, UnknownModelTypeNamesTheFileAndTheKnownTypes) {
    const auto dir = test::temp_dir("unknown");
    test::write_file(dir / "config.json", R"({"model_type": "gpt-banana", "d_model": 8})");
    try {
        load_model_config(dir);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
        EXPECT_NE(msg.find("gpt-banana"), std::string::npos) << msg;
        EXPECT_NE(msg.find("llada"), std::string::npos) << msg;
    }
}

TEST(Architecture, TestArchitectureLoadsWithBiasesFromTheTable) {
    auto m = shifted_model();
    EXPECT_EQ(m->config().architecture, "test-shifted-biased");
    EXPECT_EQ(m->config().logits_shift, 1);
    const auto& layer = m->net().weights().layers.at(0);
    ASSERT_TRUE(layer.q_bias.defined());
    EXPECT_GT(layer.k_bias.abs().sum().item<double>(), 0.0);
    bool saw_bias = false;
    for (const auto& t : m->tensors()) saw_bias |= t.name.find("q_proj.bias") != std::string::npos;
    EXPECT_TRUE(saw_bias);
    EXPECT_EQ(m->config().parameter_count(), [&] {
        int64_t n = 0;
        for (const auto& t : m->net().parameters()) n += t.numel();
        return n;
    }());
}

TEST(Architecture, BiasesChangeTheOutputAndPlansEqualTheFullForward) {
    auto m = shifted_model();
    auto& net = m->net();
    torch::InferenceMode guard;
    const int64_t L = 26;
    auto ids = torch::randint(0, m->config().vocab_size, {L}, torch::kLong);
    auto full = net.forward_full(ids.unsqueeze(0))[0];  // (L, V)
    // Without the biases the logits differ: they are used.
    auto unbiased = m->net().weights();
    for (auto& l : unbiased.layers) l.q_bias = l.k_bias = l.v_bias = torch::Tensor();
    detail::Transformer plain(m->config(), unbiased, net.device());
    EXPECT_GT(nmse(plain.forward_full(ids.unsqueeze(0))[0], full), 1e-6);

    auto cache = net.make_cache(L, false);
    test::EveryRowPlan all;
    detail::RowSet rows;
    EXPECT_LE(nmse(net.head(net.forward_plan(ids, all, cache, rows)), full), 1e-12);
    test::RowsPlan some;  // K/V of the other rows (with their biases) come from the cache
    some.rows = detail::RowSet::from_host({0, 7, 8, 25}, net.device());
    auto hidden = net.forward_plan(ids, some, cache, rows);
    EXPECT_LE(nmse(net.head(hidden), full.index_select(0, some.rows.device)), 1e-10);
}

// Under every policy, the first step's predictions come from the row before each position.
TEST(Architecture, ShiftedLogitsPredictFromThePreviousRowUnderEveryPolicy) {
    auto m = shifted_model();
    for (const auto& info : list_policies()) {
        SCOPED_TRACE(info.name);
        GenerationRequest r;
        r.prompt_text = "Reverse the list: 4 1 7";
        r.config.gen_length = 16;
        r.config.block_length = 8;
        r.config.steps = 16;
        r.config = apply_own_decoding(r.config, info.name);
        r.policy = info.name;
        trace::TraceStore store;
        Generator g(m, r, &store);
        const auto initial = g.info().initial_tokens;
        const auto summary = g.run();
        EXPECT_EQ(summary.status, trace::RunStatus::Complete);
        const auto steps = store.steps(0);
        ASSERT_FALSE(steps.empty());
        torch::InferenceMode guard;
        auto ids = torch::tensor(std::vector<int64_t>(initial.begin(), initial.end()));
        auto full = m->net().forward_full(ids.unsqueeze(0))[0];  // (L, V)
        const auto P = static_cast<int64_t>(g.info().prompt_len);
        int checked = 0;
        for (int64_t i = P; i < static_cast<int64_t>(initial.size()); ++i) {
            const int32_t predicted = steps[0]->predicted[static_cast<size_t>(i)];
            if (predicted < 0) continue;  // not predicted at step 0 by this policy
            EXPECT_EQ(predicted, full[i - 1].argmax().item<int64_t>()) << "position " << i;
            ++checked;
        }
        EXPECT_GT(checked, 0);
    }
}

}  // namespace
}  // namespace cl

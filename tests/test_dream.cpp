// The Dream architecture (engine/model/arch_dream.cpp): its published config.json reads as the 7B
// model it describes, Qwen2 options CacheLens does not implement are refused naming the file, the
// forward equals an independent Qwen2 forward written here in plain LibTorch ops over the
// checkpoint's own tensor names (without the causal mask, which is Dream's change), predictions
// come from the previous row, and the policies' invariants hold on it.
#include <cmath>

#include "engine/base/errors.h"
#include "engine/generation/policy_registry.h"
#include "engine/model/arch_dream.h"
#include "engine/model/checkpoint_presets.h"
#include "engine/model/safetensors.h"
#include "engine/model/transformer.h"
#include "plan_test_util.h"
#include "policy_run.h"
#include "test_util.h"

namespace cl {
namespace {

ModelConfig tiny_dream_config() {
    ModelConfig c = tiny_config(48, 3, 6, 2);  // grouped-query: 3 query heads per key/value head
    set_architecture(c, "dream");
    c.rope_theta = 1e6;
    c.rms_norm_eps = 1e-6;
    return c;
}

std::filesystem::path tiny_dream_dir() {
    static const std::filesystem::path dir = [] {
        auto d = test::temp_dir("tiny-dream");
        init_random_model(d, tiny_dream_config(), /*seed=*/11);
        return d;
    }();
    return dir;
}

std::shared_ptr<Model> dream_model() {
    static std::shared_ptr<Model> m = Model::load(tiny_dream_dir());
    return m;
}

TEST(Dream, ThePublishedConfigReadsAsTheSevenBillionModel) {
    const auto dir = test::temp_dir("dream-7b");
    test::write_file(dir / "config.json", find_checkpoint_preset("dream-7b-instruct").config_json);
    const ModelConfig c = load_model_config(dir);
    EXPECT_EQ(c.architecture, "dream");
    EXPECT_EQ(c.logits_shift, 1);
    EXPECT_EQ(c.d_model, 3584);
    EXPECT_EQ(c.n_heads, 28);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(c.head_dim(), 128);
    EXPECT_EQ(c.n_layers, 28);
    EXPECT_EQ(c.mlp_hidden_size, 18944);
    EXPECT_EQ(c.vocab_size, 152064);
    EXPECT_EQ(c.max_sequence_length, 131072);
    EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_EQ(c.mask_token_id, 151666);
    EXPECT_EQ(c.eos_token_id, 151643);
    EXPECT_TRUE(c.qkv_bias);
    EXPECT_FALSE(c.weight_tying);
    // Qwen2.5-7B's published parameter count, which Dream keeps.
    EXPECT_EQ(c.parameter_count(), 7'615'616'512);
}

TEST(Dream, QwenOptionsItDoesNotImplementAreRefusedNamingTheFile) {
    for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
             {"use_sliding_window", true},
             {"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}}},
             {"hidden_act", "gelu"}}) {
        SCOPED_TRACE(key);
        auto j = nlohmann::json::parse(find_checkpoint_preset("dream-7b-instruct").config_json);
        j[key] = value;
        const auto dir = test::temp_dir("dream-bad");
        test::write_file(dir / "config.json", j.dump());
        try {
            load_model_config(dir);
            ADD_FAILURE() << "accepted";
        } catch (const InputError& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
            EXPECT_NE(msg.find(key), std::string::npos) << msg;
        }
    }
}

// One tensor of the checkpoint by its Hugging Face name, in float64.
torch::Tensor checkpoint_tensor(const SafetensorsFile& file, const std::string& name) {
    const TensorInfo* info = file.find(name);
    EXPECT_NE(info, nullptr) << name;
    if (!info) return torch::zeros({1}, torch::kFloat64);
    EXPECT_EQ(info->dtype, DType::F32) << name;
    return torch::from_blob(const_cast<std::byte*>(file.data(*info)), info->shape, torch::kFloat32)
        .to(torch::kFloat64);
}

// The keys (after RoPE) and values of every layer, (KV, rows, Dh) each, as the reference wrote
// them: what a cache holds after that forward.
struct ReferenceKv {
    std::vector<torch::Tensor> k, v;
};

// Qwen2's forward as its modeling code computes it, in float64, with attention over every row (no
// causal mask: Dream's change). Computes the rows `rows` of `ids` (every row when empty); with
// `reused`, the keys and values of the other rows are the ones it holds (a cache written by an
// earlier forward) instead of fresh ones. `written` receives the computed rows' K/V.
// ids: (L,) -> logits (R, V).
torch::Tensor reference_forward(const std::filesystem::path& dir, const ModelConfig& c,
                                const torch::Tensor& ids, std::vector<int64_t> rows = {},
                                const ReferenceKv* reused = nullptr,
                                ReferenceKv* written = nullptr) {
    const auto file = SafetensorsFile::open(dir / "model.safetensors");
    auto w = [&](const std::string& name) { return checkpoint_tensor(*file, name); };
    const int64_t L = ids.size(0), H = c.n_heads, KV = c.n_kv_heads, Dh = c.head_dim();
    if (rows.empty())
        for (int64_t i = 0; i < L; ++i) rows.push_back(i);
    const auto R = static_cast<int64_t>(rows.size());
    auto at = torch::tensor(rows, torch::kLong);                                // (R) positions
    auto rms_norm = [&](const torch::Tensor& x, const torch::Tensor& weight) {  // (R, D)
        return x * torch::rsqrt(x.pow(2).mean(-1, true) + c.rms_norm_eps) * weight;
    };
    // RoPE, rotate-half form: cos/sin (R, Dh) over the frequencies repeated twice.
    auto inv_freq = 1.0 / torch::pow(c.rope_theta, torch::arange(0, Dh, 2, torch::kFloat64) /
                                                       static_cast<double>(Dh));
    auto freqs = torch::outer(at.to(torch::kFloat64), inv_freq);  // (R, Dh/2)
    auto emb = torch::cat({freqs, freqs}, -1);                    // (R, Dh)
    auto cos = emb.cos(), sin = emb.sin();
    auto rope = [&](const torch::Tensor& x) {  // (heads, R, Dh)
        auto x1 = x.narrow(-1, 0, Dh / 2), x2 = x.narrow(-1, Dh / 2, Dh / 2);
        return x * cos + torch::cat({-x2, x1}, -1) * sin;
    };
    // Keys or values over every row: the computed rows' fresh ones among the reused others.
    auto over_every_row = [&](const torch::Tensor& fresh, const std::vector<torch::Tensor>* old,
                              int64_t layer) {  // (KV, R, Dh) -> (KV, L, Dh)
        if (!old) return fresh;
        return (*old)[static_cast<size_t>(layer)].index_copy(1, at, fresh);
    };
    auto x = w("model.embed_tokens.weight").index_select(0, ids.index_select(0, at));  // (R, D)
    for (int64_t i = 0; i < c.n_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        auto h = rms_norm(x, w(p + "input_layernorm.weight"));
        auto proj = [&](const std::string& name, int64_t heads) {  // -> (heads, R, Dh)
            auto y = torch::matmul(h, w(p + name + ".weight").t()) + w(p + name + ".bias");
            return y.view({R, heads, Dh}).transpose(0, 1);
        };
        auto q = rope(proj("self_attn.q_proj", H));
        auto k_rows = rope(proj("self_attn.k_proj", KV)), v_rows = proj("self_attn.v_proj", KV);
        if (written) {
            written->k.push_back(k_rows);
            written->v.push_back(v_rows);
        }
        // repeat_kv: query head j reads key/value head j / (H / KV).
        auto k = over_every_row(k_rows, reused ? &reused->k : nullptr, i)
                     .repeat_interleave(H / KV, 0);  // (H, L, Dh)
        auto v =
            over_every_row(v_rows, reused ? &reused->v : nullptr, i).repeat_interleave(H / KV, 0);
        auto scores = torch::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(Dh));
        auto attn = torch::matmul(scores.softmax(-1), v);  // (H, R, Dh), no mask
        attn = attn.transpose(0, 1).reshape({R, H * Dh});
        x = x + torch::matmul(attn, w(p + "self_attn.o_proj.weight").t());
        auto g = rms_norm(x, w(p + "post_attention_layernorm.weight"));
        auto gate = torch::matmul(g, w(p + "mlp.gate_proj.weight").t());
        auto up = torch::matmul(g, w(p + "mlp.up_proj.weight").t());
        x = x + torch::matmul(torch::silu(gate) * up, w(p + "mlp.down_proj.weight").t());
    }
    return torch::matmul(rms_norm(x, w("model.norm.weight")), w("lm_head.weight").t());
}

using test::nmse;

TEST(Dream, TheForwardEqualsAnIndependentQwen2Forward) {
    auto m = dream_model();
    ASSERT_EQ(m->config().architecture, "dream");
    ASSERT_TRUE(m->config().qkv_bias);
    torch::InferenceMode guard;
    const int64_t L = 21;
    torch::manual_seed(3);
    auto ids = torch::randint(0, m->config().vocab_size, {L}, torch::kLong);
    auto got = m->net().forward_full(ids.unsqueeze(0))[0].to(torch::kFloat64);  // (L, V)
    auto want = reference_forward(tiny_dream_dir(), m->config(), ids);
    EXPECT_LT(nmse(got, want), 1e-10) << "normalised squared error against the float64 reference";
    EXPECT_TRUE(torch::equal(got.argmax(-1), want.argmax(-1)));
}

TEST(Dream, EveryPolicyAtItsConservativeSettingsEqualsTheBaseline) {
    for (const auto& [policy, params] : test::conservative_settings())
        test::expect_same_as_baseline(dream_model(), policy, params);
}

TEST(Dream, TheBaselineHasNoStalenessAndCachesDo) {
    const auto base = test::run_policy(dream_model(), "none", {}, 32, 16, 32, /*oracle=*/true);
    for (const auto& s : base.steps) {
        ASSERT_TRUE(s->has_oracle);
        EXPECT_NEAR(s->oracle.logits_kl, 0.0, 1e-9) << "step " << s->step;
    }
    const auto stale = test::run_policy(dream_model(), "dkv-prefill", {}, 32, 16, 32, true);
    double kl = 0;
    for (const auto& s : stale.steps) kl += s->oracle.logits_kl;
    EXPECT_GT(kl, 0.0);
}

// Under every policy, the first step's prediction for each position is the full forward's row
// before it (Dream's shifted logits).
TEST(Dream, PredictionsComeFromThePreviousRowUnderEveryPolicy) {
    auto m = dream_model();
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
        EXPECT_EQ(g.run().status, trace::RunStatus::Complete);
        const auto steps = store.steps(0);
        ASSERT_FALSE(steps.empty());
        torch::InferenceMode guard;
        auto ids = torch::tensor(std::vector<int64_t>(initial.begin(), initial.end()));
        auto full = m->net().forward_full(ids.unsqueeze(0))[0];  // (L, V)
        int checked = 0;
        for (auto i = static_cast<int64_t>(g.info().prompt_len);
             i < static_cast<int64_t>(initial.size()); ++i) {
            const int32_t predicted = steps[0]->predicted[static_cast<size_t>(i)];
            if (predicted < 0) continue;  // not predicted at step 0 by this policy
            EXPECT_EQ(predicted, full[i - 1].argmax().item<int64_t>()) << "position " << i;
            ++checked;
        }
        EXPECT_GT(checked, 0);
    }
}

// The cached path computes exactly the approximation it stands for: a step of fast-prefix on
// Dream (rows [s - 1, L) recomputed, the prefix's K/V left by a forward before the response
// changed) equals the float64 reference over the same stale keys and values, and both differ from
// the full forward of the new state. What caching costs a model is then the model's response to
// those keys, not an artefact of the engine.
TEST(Dream, ACachedStepEqualsTheReferenceOverTheSameStaleKeys) {
    auto m = dream_model();
    auto& net = m->net();
    torch::InferenceMode guard;
    const int64_t L = 24, s = 10;
    torch::manual_seed(5);
    auto before = torch::randint(0, m->config().vocab_size, {L}, torch::kLong);  // (L)
    auto after = before.clone();
    after.narrow(0, s, L - s).copy_(torch::randint(0, m->config().vocab_size, {L - s}));
    std::vector<int64_t> rows;
    for (int64_t i = s - 1; i < L; ++i) rows.push_back(i);

    auto cache = net.make_cache(L, false);
    detail::RowSet out;
    test::EveryRowPlan full;
    net.forward_plan(before, full, cache, out);  // the cache as the block start left it
    test::RowsPlan step;
    step.rows = detail::RowSet::from_host(rows, torch::kCPU);
    auto got = net.head(net.forward_plan(after, step, cache, out)).to(torch::kFloat64);  // (R, V)
    ASSERT_EQ(out.host, rows);

    ReferenceKv stale;
    reference_forward(tiny_dream_dir(), m->config(), before, {}, nullptr, &stale);
    auto want = reference_forward(tiny_dream_dir(), m->config(), after, rows, &stale);
    EXPECT_LT(nmse(got, want), 1e-10);
    auto fresh = reference_forward(tiny_dream_dir(), m->config(), after)
                     .index_select(0, torch::tensor(rows, torch::kLong));
    EXPECT_GT(nmse(want, fresh), 1e-6) << "the stale keys must matter, or this proves nothing";
}

// GenerationConfig::fresh_prefix: the first n rows are recomputed at every layer of every step
// under every policy, and a length beyond the prompt is refused naming the setting.
TEST(Dream, TheFreshPrefixIsRecomputedAtEveryStepUnderEveryPolicy) {
    GenerationConfig c = test::policy_test_config();
    c.fresh_prefix = 6;
    for (const auto& info : list_policies()) {
        SCOPED_TRACE(info.name);
        const auto run = test::run_policy_with(dream_model(), info.name, {}, c);
        ASSERT_FALSE(run.steps.empty());
        for (const auto& st : run.steps)
            for (int32_t l = 0; l < st->n_layers; ++l)
                for (int32_t r = 0; r < c.fresh_prefix; ++r)
                    ASSERT_EQ(st->action(l, r), trace::RowAction::Recomputed)
                        << "step " << st->step << " layer " << l << " row " << r;
    }
    c.fresh_prefix = 1000;
    try {
        test::run_policy_with(dream_model(), "fast-prefix", {}, c);
        ADD_FAILURE() << "a fresh prefix longer than the prompt was accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("fresh_prefix"), std::string::npos) << e.what();
    }
}

// With the whole prompt fresh and a single block, fast-prefix reuses nothing: it is the baseline,
// with no staleness at any step; without it, the prompt's K/V are stale.
TEST(Dream, FastPrefixWithTheWholePromptFreshIsTheBaselineInOneBlock) {
    GenerationRequest r;
    r.prompt_text = "Remember: abc=123, xyz=987. What is abc?";
    r.config = test::policy_test_config(16, 16, 16);
    trace::TraceStore store;
    const int64_t P = Generator(dream_model(), r, &store).info().prompt_len;
    auto staleness = [&](int64_t fresh_prefix) {  // summed KL of the steps' logits to the full
        GenerationConfig c = r.config;
        c.fresh_prefix = fresh_prefix;
        double kl = 0;
        for (const auto& st :
             test::run_policy_with(dream_model(), "fast-prefix", {}, c, true).steps)
            kl += st->oracle.logits_kl;
        return kl;
    };
    EXPECT_GT(staleness(0), 1e-7);
    EXPECT_LT(staleness(P), 1e-9);
    r.config.fresh_prefix = P;
    test::expect_same_as_baseline(dream_model(), "fast-prefix", {}, r.config);
}

TEST(Dream, TheChatTemplateIsChatML) {
    EXPECT_EQ(detail::dream_chat_template(dream_model()->tokenizer(), "What is 2 + 2?"),
              "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
              "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n");
    // The tiny model's byte-level tokenizer has no ChatML tokens: prompts go in as they are.
    EXPECT_FALSE(dream_model()->has_chat_template());
    EXPECT_EQ(dream_model()->eot_id(), -1);
}

}  // namespace
}  // namespace cl

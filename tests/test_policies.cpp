// The invariants of POLICIES.md section 5 for every policy, and scripted recompute sets.
#include <cmath>
#include <limits>
#include <set>

#include "engine/base/cpu_clones.h"
#include "engine/base/errors.h"
#include "engine/generation/generator.h"
#include "engine/generation/policies/attention_rollout.h"
#include "engine/generation/policies/row_similarity.h"
#include "engine/generation/policy_params.h"
#include "engine/generation/policy_registry.h"
#include "engine/model/blocks.h"
#include "engine/model/transformer.h"
#include "engine/trace/trace_store.h"
#include "policy_run.h"
#include "scoped_kernel_set.h"
#include "scoped_threads.h"
#include "test_util.h"

namespace cl {
namespace {

std::shared_ptr<Model> model() {
    static std::shared_ptr<Model> m =
        Model::load(test::make_tiny_model("policies", 48, 3, 4, 2, 21));
    return m;
}

using test::PolicyRun;

PolicyRun run(const std::string& policy, std::map<std::string, double> params = {}, int64_t G = 32,
              int64_t B = 16, int64_t T = 32, bool oracle = false,
              Remasking remasking = Remasking::LowConfidence) {
    return test::run_policy(model(), policy, std::move(params), G, B, T, oracle, remasking);
}

// Positions recomputed at `layer` in a step.
std::set<int64_t> recomputed(const trace::StepRecord& s, int layer) {
    std::set<int64_t> out;
    for (int i = 0; i < s.seq_len; ++i)
        if (s.action(layer, i) == trace::RowAction::Recomputed) out.insert(i);
    return out;
}

TEST(Policies, EveryPolicyIsRegisteredWithDocumentedParameters) {
    for (const std::string name :
         {"none", "dkv-decode", "dkv-prefill", "dkv-pd", "dkv-greedy", "dllm-cache", "d2cache",
          "elastic", "fast-prefix", "fast-dual", "block-cache"}) {
        const auto* info = find_policy(name);
        ASSERT_NE(info, nullptr) << name;
        EXPECT_FALSE(info->summary.empty());
        for (const auto& p : info->params) {
            EXPECT_FALSE(p.help.empty()) << name << "." << p.name;
            // Both defaults must pass the policy's own validation.
            EXPECT_NO_THROW(resolve_policy_params(name, {{p.name, p.default_value}}));
            EXPECT_NO_THROW(resolve_policy_params(name, {{p.name, p.paper_default}}));
            if (p.type == ParamType::Switch) {
                EXPECT_EQ(p.max - p.min, 1) << p.name;
            }
            if (p.type == ParamType::Choice) {
                EXPECT_EQ(p.choices.size(), static_cast<size_t>(p.max - p.min + 1)) << p.name;
            }
        }
    }
    EXPECT_EQ(find_policy("dkv-decode")->params[0].default_value, 8);
    EXPECT_EQ(find_policy("dllm-cache")->params[0].default_value, 50);
    EXPECT_DOUBLE_EQ(find_policy("elastic")->params[1].default_value, 0.9);
}

// A parameter struct as a policy declares it: the specs come from the one declaration, the
// defaults from the member initialisers, and read() fills the typed members.
struct ExampleParams {
    enum class Mode : uint8_t { A, B, C };
    int64_t interval = 8;
    double share = 0.25;
    bool on = true;
    Mode mode = Mode::B;
    static const ParamList<ExampleParams>& list() {
        static const ParamList<ExampleParams> l{
            {"interval", &ExampleParams::interval, 1, 100, 4, "an interval"},
            {"share", &ExampleParams::share, 0, 1, 0.5, "a share"},
            {"on", &ExampleParams::on, 0, 1, 1, "a switch"},
            {"mode", &ExampleParams::mode, 0, 2, 0, "a choice", {"a", "b", "c"}}};
        return l;
    }
};

TEST(Policies, TypedParametersComeFromOneDeclaration) {
    const auto specs = ExampleParams::list().specs();
    ASSERT_EQ(specs.size(), 4u);
    EXPECT_EQ(specs[0].type, ParamType::Integer);
    EXPECT_EQ(specs[0].default_value, 8);
    EXPECT_EQ(specs[0].paper_default, 4);
    EXPECT_EQ(specs[1].type, ParamType::Real);
    EXPECT_EQ(specs[2].type, ParamType::Switch);
    EXPECT_EQ(specs[3].type, ParamType::Choice);
    EXPECT_EQ(specs[3].default_value, 1);
    const auto p =
        ExampleParams::list().read({{"interval", 3}, {"share", 0.75}, {"on", 0}, {"mode", 2}});
    EXPECT_EQ(p.interval, 3);
    EXPECT_EQ(p.share, 0.75);
    EXPECT_FALSE(p.on);
    EXPECT_EQ(p.mode, ExampleParams::Mode::C);
    EXPECT_EQ(ExampleParams::list().read({}).interval, 8);  // absent: the default
}

TEST(Policies, ParameterValuesAreCheckedAgainstTheirType) {
    auto message = [](const std::string& policy, const std::map<std::string, double>& p) {
        try {
            resolve_policy_params(policy, p);
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(message("dkv-decode", {{"refresh_interval", 2.5}}).find("integer"),
              std::string::npos);
    EXPECT_NE(message("dkv-decode", {{"delay", 2}}).find("outside [0, 1]"), std::string::npos);
    EXPECT_NE(message("dllm-cache", {{"metric", 1.5}}).find("choice"), std::string::npos);
    EXPECT_NE(message("elastic", {{"gama", 0.5}}).find("'gama'"), std::string::npos);
    EXPECT_EQ(message("elastic", {{"gamma", 0.5}}), "");
}

TEST(Policies, OwnDecodingIsTyped) {
    EXPECT_EQ(find_policy("fast-dual")->own_decoding.threshold, 0.9);
    EXPECT_EQ(find_policy("dkv-greedy")->own_decoding.remasking, Remasking::Random);
    EXPECT_EQ(find_policy("d2cache")->own_decoding.certainty_prior, true);
    EXPECT_TRUE(find_policy("dkv-decode")->own_decoding.empty());
    const auto cfg = apply_own_decoding(GenerationConfig{}, "elastic");
    EXPECT_DOUBLE_EQ(cfg.threshold, 0.9);
    EXPECT_EQ(find_policy("elastic")->own_decoding.describe(), "threshold = 0.9");
}

TEST(Policies, ConservativeSettingsEqualTheBaseline) {
    for (const auto& [policy, params] : test::conservative_settings())
        test::expect_same_as_baseline(model(), policy, params);
}

TEST(Policies, DkvDecodeRecomputesExactlyMaskedPlusJustDecoded) {
    const PolicyRun r = run("dkv-decode", {{"refresh_interval", 100}});
    int checked = 0;
    for (size_t t = 1; t < r.steps.size(); ++t) {
        const auto& s = *r.steps[t];
        if (s.step_in_block <= 1) {
            EXPECT_EQ(recomputed(s, 0).size(), static_cast<size_t>(s.seq_len))
                << "block start is full";
            continue;
        }
        std::set<int64_t>
            expected;  // M_{t-1}: masked at the step's input + decoded at the previous step
        const auto& prev = *r.steps[t - 1];
        for (int i = 0; i < s.seq_len; ++i)
            if (prev.states[static_cast<size_t>(i)] == trace::TokenState::Masked)
                expected.insert(i);
        for (int32_t d : prev.committed) expected.insert(d);
        for (int l = 0; l < s.n_layers; ++l) EXPECT_EQ(recomputed(s, l), expected) << "step " << t;
        ++checked;
    }
    EXPECT_GT(checked, 10);
}

// The steps at which a policy ran a full forward (every row of layer 0 recomputed).
std::vector<int> full_steps(const PolicyRun& r) {
    std::vector<int> out;
    for (const auto& s : r.steps)
        if (recomputed(*s, 0).size() == static_cast<size_t>(s->seq_len)) out.push_back(s->step);
    return out;
}

// The steps 0..T-1 (blocks of `per_block` steps) for which `full(step, step_in_block)` holds.
template <typename F>
std::vector<int> schedule(int T, int per_block, F full) {
    std::vector<int> out;
    for (int t = 0; t < T; ++t)
        if (full(t, t % per_block)) out.push_back(t);
    return out;
}

// dKV-Cache's reference decode loop (generation_utils/llada_dkv_cache_decode.py): within each block
// a full forward at steps 0 and 1 and wherever `i % cache_reloading_step == 0`; the greedy loop
// at `i % cache_reloading_step == 0` only. 32 steps, blocks of 16 steps.
TEST(Policies, DkvVariantsRefreshOnTheReferenceSchedule) {
    for (int n : {1, 2, 3, 4, 5, 8, 16}) {
        SCOPED_TRACE("N = " + std::to_string(n));
        const auto decode = run("dkv-decode", {{"refresh_interval", n}});
        EXPECT_EQ(full_steps(decode),
                  schedule(32, 16, [n](int, int i) { return i <= 1 || i % n == 0; }));
        const auto no_reset = run("dkv-decode", {{"refresh_interval", n}, {"block_reset", 0}});
        EXPECT_EQ(full_steps(no_reset),
                  schedule(32, 16, [n](int t, int) { return t == 0 || t % n == 0; }));
        const auto greedy = run("dkv-greedy", {{"refresh_interval", n}, {"window", 1}}, 32, 16, 32,
                                false, Remasking::Random);
        EXPECT_EQ(full_steps(greedy), schedule(32, 16, [n](int, int i) { return i % n == 0; }));
        // dkv-pd never recomputes the prompt after step 0; its response refreshes are at N, 2N...
        const auto pd = run("dkv-pd", {{"refresh_interval", n}});
        std::vector<int> refreshes;
        for (const auto& s : pd.steps)
            for (const auto& e : s->triggers)
                if (e.kind == "interval") refreshes.push_back(s->step);
        EXPECT_EQ(refreshes, schedule(32, 16, [n](int t, int) { return t > 0 && t % n == 0; }));
    }
}

TEST(Policies, NoDelayAblationSkipsJustDecodedRows) {
    const PolicyRun r = run("dkv-decode", {{"refresh_interval", 100}, {"delay", 0}});
    const auto& s = *r.steps[5];
    for (int32_t d : r.steps[4]->committed) EXPECT_EQ(s.action(0, d), trace::RowAction::KvReused);
}

TEST(Policies, FastDualRecomputesExactlyTheBlockAndPrefixTheSuffixToo) {
    const PolicyRun dual = run("fast-dual"), prefix = run("fast-prefix");
    for (size_t t = 0; t < dual.steps.size(); ++t) {
        const auto& s = *dual.steps[t];
        const int P = s.seq_len - 32, start = P + s.block * 16;
        std::set<int64_t> block, suffix;
        for (int i = start; i < start + 16; ++i) block.insert(i);
        for (int i = start; i < s.seq_len; ++i) suffix.insert(i);
        const size_t all = static_cast<size_t>(s.seq_len);
        EXPECT_EQ(recomputed(s, 1),
                  s.step_in_block == 0 ? std::set<int64_t>(recomputed(s, 1)) : block);
        if (s.step_in_block == 0) {
            EXPECT_EQ(recomputed(s, 1).size(), all);
        }
        const auto& p = *prefix.steps[t];
        if (p.step_in_block > 0) {
            EXPECT_EQ(recomputed(p, 2), suffix) << t;
        }
    }
}

TEST(Policies, PrefillAndPdNeverRecomputeThePromptAfterTheFirstStep) {
    for (const std::string name : {"dkv-prefill", "dkv-pd"}) {
        const PolicyRun r = run(name);
        const int P = r.steps[0]->seq_len - 32;
        for (size_t t = 1; t < r.steps.size(); ++t)
            for (int i = 0; i < P; ++i)
                ASSERT_EQ(r.steps[t]->action(0, i), trace::RowAction::KvReused) << name;
    }
}

TEST(Policies, GreedyUsesThePlannedCommitsUnderRandomRemasking) {
    const PolicyRun r = run("dkv-greedy", {{"refresh_interval", 100}, {"window", 1}}, 32, 16, 32,
                            false, Remasking::Random);
    for (size_t t = 1; t < r.steps.size(); ++t) {
        const auto& s = *r.steps[t];
        if (s.step_in_block == 0) continue;  // a block starts with a full forward
        auto rows = recomputed(s, 0);
        for (int32_t c : s.committed) EXPECT_TRUE(rows.count(c)) << "D_t is recomputed";
        for (int32_t d : r.steps[t - 1]->committed)
            EXPECT_TRUE(rows.count(d)) << "D_{t-1} is recomputed";
        EXPECT_LE(rows.size(), 1u + 3u * r.steps[t - 1]->committed.size() + s.committed.size());
    }
}

TEST(Policies, DllmCacheMarksFeatureReuseAndVerifyPicks) {
    const PolicyRun r = run("dllm-cache", {{"rho", 0.25}});
    const auto& s = *r.steps[2];  // counter 3: neither span refreshes, V-verify only
    const int P = s.seq_len - 32;
    EXPECT_EQ(recomputed(s, 0).size(), static_cast<size_t>(s.seq_len))
        << "layer 0 always recomputed";
    for (int l = 1; l < s.n_layers; ++l) {
        auto rows = recomputed(s, l);
        EXPECT_EQ(rows.size(), 8u) << "floor(0.25 * 32) response rows";
        for (int64_t i : rows) EXPECT_GE(i, P);
        EXPECT_EQ(s.action(l, 0), trace::RowAction::FeatureReused);
        int probed = 0;
        for (int i = P; i < s.seq_len; ++i)
            probed += s.action(l, i) == trace::RowAction::ProbedOnly;
        EXPECT_EQ(probed, 32 - 8);
    }
    bool saw_verify = false;
    for (const auto& e : s.triggers) saw_verify |= e.kind == "v-verify" && e.fired;
    EXPECT_TRUE(saw_verify);
}

TEST(Policies, ElasticRecordsDriftTestsWithValuesAndThresholds) {
    const PolicyRun r = run("elastic", {{"gamma", 0.9}, {"window", 4}});
    int tests = 0;
    for (const auto& s : r.steps)
        for (const auto& e : s->triggers)
            if (e.kind == "drift") {
                ++tests;
                EXPECT_DOUBLE_EQ(e.threshold, 0.9);
                if (!std::isnan(e.value) && e.fired) {
                    EXPECT_LT(e.value, 0.9);
                }
                if (!e.fired) {
                    EXPECT_GE(e.value, 0.9);
                }
            }
    EXPECT_GT(tests, 0);
    // Layers from l* on recompute every row; shallower layers only the queries.
    for (const auto& s : r.steps) {
        int fired = -1;
        for (const auto& e : s->triggers)
            if (e.kind == "drift" && e.fired && fired < 0) fired = e.layer;
        if (fired < 0 || s->step == 0) continue;
        for (int l = fired; l < s->n_layers; ++l)
            EXPECT_EQ(recomputed(*s, l).size(), static_cast<size_t>(s->seq_len));
    }
}

// Elastic asks the forward for the attention of its window rows only (and last step's window
// rows still computed): on the CPU the scores the attention keeps instead of the probabilities
// (LayerPlan::want_probs_mean; at two threads each kv head's on the thread that ran it), with the
// window's column sums; when the attention panel wants every row's probabilities, it gets them all
// and the policy sums them itself. All must give the same drift values, to the bit, and the same
// tokens.
TEST(Policies, ElasticDriftFromItsWindowRowsEqualsTheOneFromEveryRow) {
    for (const int threads : {1, 2}) {
        const test::ScopedThreads scope(threads);
        std::vector<trace::TriggerEvent> drift[2];
        std::vector<int32_t> tokens[2];
        for (const bool every_row : {false, true}) {
            GenerationRequest r;
            r.prompt_text = "Remember: abc=123, xyz=987. What is abc?";
            r.config = test::policy_test_config();
            r.policy = "elastic";
            // gamma just under the cosines this prompt gives (0.9999-1): some layers escalate
            r.params = {{"gamma", 0.99999}, {"window", 4}, {"track_num", 2}};
            trace::TraceStore store;
            store.set_want_all_attention_means(every_row);
            Generator g(model(), r, &store);
            g.run();
            for (const auto& s : store.steps(0))
                for (const auto& e : s->triggers)
                    if (e.kind == "drift") drift[every_row].push_back(e);
            tokens[every_row] = store.steps(0).back()->tokens;
        }
        ASSERT_EQ(drift[0].size(), drift[1].size()) << threads << " threads";
        int fired = 0, measured = 0;
        for (size_t i = 0; i < drift[0].size(); ++i) {
            const auto &a = drift[0][i], &b = drift[1][i];
            EXPECT_EQ(a.layer, b.layer) << "test " << i << ", " << threads << " threads";
            EXPECT_EQ(a.fired, b.fired) << "test " << i << ", " << threads << " threads";
            if (std::isnan(a.value)) {
                EXPECT_TRUE(std::isnan(b.value)) << "test " << i << ", " << threads << " threads";
            } else {
                EXPECT_EQ(a.value, b.value) << "test " << i << ", " << threads << " threads";
                ++measured;
            }
            fired += a.fired ? 1 : 0;
        }
        EXPECT_GT(measured, 10);  // the test ran on real cosines, some firing and some not
        EXPECT_GT(fired, 0);
        EXPECT_LT(fired, static_cast<int>(drift[0].size()));
        EXPECT_EQ(tokens[0], tokens[1]) << threads << " threads";
    }
}

// Rows the engine adds to a policy's (here --fresh-prefix's first 6 prompt rows, recomputed at
// every step) come before Elastic's queries: its drift test must find its window by position, not
// by its own count of queries (which would read the prefix rows' attention). Layer 0
// sees only embeddings, so its attention, and the first cached step's layer-0 drift value, cannot
// depend on which prompt rows were recomputed.
TEST(Policies, ElasticFindsItsWindowAmongTheEngineRows) {
    double first_drift[2] = {NAN, NAN};
    for (const int64_t prefix : {0, 6}) {
        GenerationRequest r;
        r.prompt_text = "Remember: abc=123, xyz=987. What is abc?";
        r.config = test::policy_test_config();
        r.config.fresh_prefix = prefix;
        r.policy = "elastic";
        r.params = {{"gamma", 0.5}, {"window", 4}};
        trace::TraceStore store;
        Generator g(model(), r, &store);
        g.run();
        for (const auto& e : store.steps(0).at(1)->triggers)
            if (e.kind == "drift" && e.layer == 0) first_drift[prefix > 0] = e.value;
    }
    ASSERT_FALSE(std::isnan(first_drift[0]));
    EXPECT_EQ(first_drift[0], first_drift[1]);
}

TEST(Policies, D2CacheSelectsFewRowsAndDecodesOnlyRecomputedOnes) {
    const PolicyRun r = run("d2cache", {{"k", 4}, {"p", 0.1}});
    for (size_t t = 1; t < r.steps.size(); ++t) {
        const auto& s = *r.steps[t];
        auto rows = recomputed(s, 0);
        EXPECT_LT(rows.size(), static_cast<size_t>(s.seq_len));
        for (int l = 1; l < s.n_layers; ++l)
            EXPECT_EQ(recomputed(s, l), rows) << "same set at every layer";
        for (int32_t c : s.committed) EXPECT_TRUE(rows.count(c));
    }
    EXPECT_EQ(r.summary.status, trace::RunStatus::Complete);
}

// d2Cache's rollout on the CPU (float64 loops over the float32 head means) against the tensor ops'
// (the path of a GPU) on layers that computed every row, a few rows and none but one: the same
// influence to rounding, summing to L (every A_l is row-stochastic).
TEST(Policies, D2CacheRolloutOnTheHostEqualsTheTensorOps) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    const int64_t H = 3, L = 23;
    torch::manual_seed(5);
    const std::vector<std::vector<int64_t>> layer_rows = {{}, {1, 4, 9, 17, 22}, {6}};
    std::vector<policies::rollout::LayerAttention> host, tensors;
    for (const auto& rows : layer_rows) {
        const int64_t R = rows.empty() ? L : static_cast<int64_t>(rows.size());
        const auto probs = torch::softmax(torch::randn({H, R, L}) * 2, 2);  // (H, R, L) float32
        const auto mean = detail::head_mean_f32(probs);                     // (R, L) float32
        const auto device_rows = rows.empty() ? torch::Tensor() : torch::tensor(rows);
        host.push_back(policies::rollout::keep(mean, device_rows, rows));
        tensors.push_back(policies::rollout::keep(mean, device_rows, rows));
        ASSERT_TRUE(host.back().by_loops);
        tensors.back().by_loops = false;  // a GPU's path, on the CPU
    }
    const auto a = policies::rollout::influence(host, L);
    const auto b = policies::rollout::influence(tensors, L);
    ASSERT_EQ(a.size(), static_cast<size_t>(L));
    ASSERT_EQ(b.size(), static_cast<size_t>(L));
    double total = 0;
    for (size_t j = 0; j < a.size(); ++j) {
        EXPECT_NEAR(a[j], b[j], 1e-13) << "position " << j;
        total += a[j];
    }
    EXPECT_NEAR(total, static_cast<double>(L), 1e-5);  // float32 rows sum to 1 within ~1e-7
    EXPECT_NE(a[0], a[1]) << "the layers' attention must reach the influence";
}

// The head mean d2Cache keeps, its rows split over 2 threads (300 rows of 4 x 100: 81 a task), is
// the one thread's bit for bit and the float64 mean's to float32 rounding.
TEST(Policies, D2CacheHeadMeanIsTheSameAtEveryThreadCount) {
    torch::manual_seed(6);
    const auto probs = torch::softmax(torch::randn({4, 300, 100}), 2);  // (H, R, L) float32
    std::vector<torch::Tensor> means;
    for (const int threads : {1, 2}) {
        const test::ScopedThreads scope(threads);
        means.push_back(detail::head_mean_f32(probs));
    }
    EXPECT_TRUE(torch::equal(means[0], means[1]));
    const auto exact = probs.to(torch::kFloat64).mean(0);  // (R, L)
    EXPECT_LE((means[1].to(torch::kFloat64) - exact).abs().max().item<double>(),
              1e-7 * exact.abs().max().item<double>());
    // The bits of the float32 sum over the heads in order, divided by H: with 4 heads (a
    // reciprocal multiply) as with 3 (a division).
    for (const int64_t heads : {4, 3}) {
        const auto p = probs.narrow(0, 0, heads);  // (heads, R, L)
        auto want = p[0].clone();                  // (R, L)
        for (int64_t h = 1; h < heads; ++h) want += p[h];
        want /= static_cast<float>(heads);
        EXPECT_TRUE(torch::equal(detail::head_mean_f32(p.contiguous()), want)) << heads << " heads";
    }
}

// dLLM-Cache's V-verify similarity: the float32 loops give LibTorch's float64 cosine of the
// flattened rows (every kv head's values) to rounding, from the given cached row on; the ranking
// puts equal similarities in position order; bad shapes are refused.
TEST(Policies, DllmCacheRowCosinesFollowTheFloat64Definition) {
    torch::manual_seed(8);
    const int64_t H = 2, G = 37, Dh = 20, L = 60, first = 23;     // Dh: 2 lanes of 8, then 4 more
    const auto fresh = torch::randn({H, G, Dh});                  // (H, G, Dh) float32
    auto cached = torch::randn({H, L, Dh});                       // (H, L, Dh)
    cached.narrow(1, first, 5).copy_(fresh.narrow(1, 0, 5) * 3);  // rows 0-4: cos 1
    cached.narrow(1, first + 5, 1).zero_();                       // row 5: an all-zero cached row
    const auto got = policies::similarity::row_cosines(fresh, cached, first, 1e-12);
    const auto want = torch::cosine_similarity(
        fresh.to(torch::kFloat64).transpose(0, 1).reshape({G, -1}),
        cached.narrow(1, first, G).to(torch::kFloat64).transpose(0, 1).reshape({G, -1}), 1,
        1e-12);  // (G)
    ASSERT_EQ(got.size(), static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g)
        EXPECT_NEAR(got[static_cast<size_t>(g)], want[g].item<double>(), 1e-15) << "row " << g;
    EXPECT_EQ(got[5], 0.0);
    // The same bits at every vector width (4, 8 and, where the CPU has them, 16 floats).
    for (const int floats : {4, 8}) {
        cpu::limit_vector_floats(floats);
        EXPECT_EQ(policies::similarity::row_cosines(fresh, cached, first, 1e-12), got)
            << floats << " floats";
    }
    cpu::limit_vector_floats(0);
    // Split over threads (a share of the rows each, where there are enough of them): the same bits
    // as on one thread, row by row.
    {
        const int64_t many = 1100;
        const auto fresh_many = torch::randn({H, many, Dh});
        const auto cached_many = torch::randn({H, many + first, Dh});
        std::vector<double> one;
        {
            const test::ScopedThreads scope(1);
            one = policies::similarity::row_cosines(fresh_many, cached_many, first, 1e-12);
        }
        const test::ScopedThreads scope(2);
        EXPECT_EQ(policies::similarity::row_cosines(fresh_many, cached_many, first, 1e-12), one);
        for (const int64_t g : {int64_t{0}, many / 2, many - 1})
            EXPECT_EQ(policies::similarity::row_cosines(fresh_many.narrow(1, g, 1), cached_many,
                                                        first + g, 1e-12)[0],
                      one[static_cast<size_t>(g)])
                << "row " << g;
        // With replace: the cosines against the rows as they were, which then hold fresh's, the
        // rows before `first` as they were; the tensor path the same.
        for (const bool loops : {true, false}) {
            auto taking = loops ? cached_many.clone() : cached_many.to(torch::kFloat64);
            const auto got_sims = policies::similarity::row_cosines(
                loops ? fresh_many : fresh_many.to(torch::kFloat64), taking, first, 1e-12, true);
            for (size_t g = 0; g < one.size(); g += 97)
                EXPECT_NEAR(got_sims[g], one[g], loops ? 0.0 : 1e-15) << g;
            EXPECT_TRUE(
                torch::equal(taking.narrow(1, first, many).to(torch::kFloat32), fresh_many));
            EXPECT_TRUE(torch::equal(taking.narrow(1, 0, first).to(torch::kFloat32),
                                     cached_many.narrow(1, 0, first)));
        }
    }
    // The same rows through the tensor path (float64 input) agree to rounding too.
    const auto by_tensors = policies::similarity::row_cosines(
        fresh.to(torch::kFloat64), cached.to(torch::kFloat64), first, 1e-12);
    for (int64_t g = 0; g < G; ++g)
        EXPECT_NEAR(by_tensors[static_cast<size_t>(g)], got[static_cast<size_t>(g)], 1e-15);
    // The probe's V is a view of its heads (G, Hkv, Dh) -> (Hkv, G, Dh): read in place.
    const auto view = fresh.transpose(0, 1).contiguous().transpose(0, 1);  // strides (Dh, H Dh, 1)
    ASSERT_FALSE(view.is_contiguous());
    EXPECT_EQ(policies::similarity::row_cosines(view, cached, first, 1e-12), got);
    const auto order = policies::similarity::least_similar_first({0.5, 1.0, -0.2, 1.0, 0.5, 1.0});
    EXPECT_EQ(order, (std::vector<int64_t>{2, 0, 4, 1, 3, 5}));
    const double nan = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(policies::similarity::least_similar_first({nan, 0.5, nan, -1.0}),
              (std::vector<int64_t>{3, 1, 0, 2}));
    // The first few of that order only: the same rows in the same order at every count.
    const std::vector<double> ties{0.5, nan, 1.0, -0.2, 0.5, 1.0, nan, 0.5, -0.2};
    const auto whole = policies::similarity::least_similar_first(ties);
    EXPECT_EQ(whole, (std::vector<int64_t>{3, 8, 0, 4, 7, 2, 5, 1, 6}));
    for (size_t count = 0; count <= ties.size() + 1; ++count)
        EXPECT_EQ(policies::similarity::least_similar_first(ties, count),
                  std::vector<int64_t>(
                      whole.begin(),
                      whole.begin() + static_cast<std::ptrdiff_t>(std::min(count, whole.size()))))
            << count;
    EXPECT_THROW(policies::similarity::row_cosines(fresh, cached, L - G + 1, 1e-12),
                 std::invalid_argument);
    EXPECT_THROW(policies::similarity::row_cosines(fresh, cached.narrow(2, 0, 8), 0, 1e-12),
                 std::invalid_argument);
}

TEST(Policies, FlopCountAgreesWithRecordedRows) {
    const auto& c = model()->config();
    const int64_t G = 32;  // run()'s generation length: dllm-cache's response rows
    for (const std::string name :
         {"dkv-decode", "fast-dual", "d2cache", "elastic", "dkv-prefill", "dllm-cache"}) {
        const PolicyRun r = run(name);
        for (const auto& s : r.steps) {
            double flops = 0;
            for (int l = 0; l < s->n_layers; ++l) {
                flops += detail::layer_flops(c, recomputed(*s, l).size(), s->seq_len);
                // dllm-cache's V-verify probed the V of every response row of the layer.
                bool probed = false;
                for (int i = 0; i < s->seq_len; ++i)
                    probed = probed || s->action(l, i) == trace::RowAction::ProbedOnly;
                if (probed) flops += detail::probe_flops(c, G, /*with_k=*/false);
            }
            int64_t heads = 0;
            for (float conf : s->confidence) heads += !std::isnan(conf);
            flops += detail::head_flops(c, heads);
            EXPECT_NEAR(s->flops, flops, 1e-6 * flops) << name << " step " << s->step;
        }
        EXPECT_LT(r.summary.flops, r.summary.flops_full) << name;
    }
}

TEST(Policies, OracleErrorIsZeroForTheBaselineAndPositiveForStaleCaches) {
    const PolicyRun base = run("none", {}, 32, 16, 32, true);
    for (const auto& s : base.steps) {
        ASSERT_TRUE(s->has_oracle);
        EXPECT_NEAR(s->oracle.logits_kl, 0.0, 1e-9);
        EXPECT_FALSE(s->oracle.commit_differs);
    }
    const PolicyRun stale = run("dkv-prefill", {}, 32, 16, 32, true);
    double worst = 1.0, kl = 0;
    for (const auto& s : stale.steps) {
        kl += s->oracle.logits_kl;
        for (size_t i = 0; i < s->oracle.k_cos.size(); ++i)
            // Layer 0 reads only embeddings: a recomputed row there is exact. Deeper recomputed
            // rows attend to stale prompt K/V, so they may differ from the oracle too.
            if (s->actions[i] == trace::RowAction::Recomputed &&
                i < static_cast<size_t>(s->seq_len))
                EXPECT_NEAR(s->oracle.k_cos[i], 1.0, 1e-5);
            else if (!std::isnan(s->oracle.k_cos[i]))
                worst = std::min<double>(worst, s->oracle.k_cos[i]);
    }
    EXPECT_LT(worst, 0.9999) << "the never-refreshed prompt drifts";
    EXPECT_GT(kl, 0.0);
}

}  // namespace
}  // namespace cl

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <thread>

#include "engine/base/cpu_clones.h"
#include "engine/base/errors.h"
#include "engine/generation/generator.h"
#include "engine/generation/policy_registry.h"
#include "engine/generation/row_sampler.h"
#include "engine/generation/sampler.h"
#include "engine/trace/trace_store.h"
#include "test_requests.h"
#include "test_util.h"

namespace cl {
namespace {

std::shared_ptr<Model> tiny() {
    static std::shared_ptr<Model> m = Model::load(test::make_tiny_model("sampler", 32, 2, 4, 4, 5));
    return m;
}

using test::request;

std::vector<std::shared_ptr<const trace::StepRecord>> run_all(const GenerationRequest& r,
                                                              trace::RunSummary* s = nullptr) {
    trace::TraceStore store;
    Generator g(tiny(), r, &store);
    auto summary = g.run();
    if (s) *s = summary;
    return store.steps(r.run_id);
}

TEST(Sampler, TransferScheduleSplitsEvenlyFrontLoaded) {
    EXPECT_EQ(transfer_schedule(32, 32), std::vector<int64_t>(32, 1));
    EXPECT_EQ(transfer_schedule(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
    EXPECT_EQ(transfer_schedule(3, 5), (std::vector<int64_t>{1, 1, 1, 0, 0}));
    EXPECT_EQ(transfer_schedule(0, 2), (std::vector<int64_t>{0, 0}));
}

TEST(Sampler, LowConfidenceCommitsTheScheduleInsideTheBlock) {
    auto r = request(16, 8, 8);  // 2 blocks, 4 steps each: 2 tokens per step
    trace::RunSummary s;
    auto steps = run_all(r, &s);
    ASSERT_EQ(steps.size(), 8u);
    const int P = static_cast<int>(steps[0]->seq_len) - 16;
    for (const auto& st : steps) {
        EXPECT_EQ(st->committed.size(), 2u);
        for (int32_t pos : st->committed) {
            EXPECT_GE(pos, P + st->block * 8);
            EXPECT_LT(pos, P + (st->block + 1) * 8);
        }
        // The committed tokens are the most confident in-block predictions of that step.
        float min_committed = 2.f;
        for (int32_t pos : st->committed)
            min_committed = std::min(min_committed, st->confidence[static_cast<size_t>(pos)]);
        for (int i = P + st->block * 8; i < P + (st->block + 1) * 8; ++i)
            if (st->states[static_cast<size_t>(i)] == trace::TokenState::Masked) {
                EXPECT_LE(st->confidence[static_cast<size_t>(i)], min_committed + 1e-7);
            }
    }
    EXPECT_EQ(s.status, trace::RunStatus::Complete);
    for (auto st : steps.back()->states) EXPECT_NE(st, trace::TokenState::Masked);
}

TEST(Sampler, CommittedTokensNeverChange) {
    auto r = request(16, 8, 16);
    r.config.temperature = 1.0;
    auto steps = run_all(r);
    for (size_t t = 1; t < steps.size(); ++t)
        for (size_t i = 0; i < steps[t]->tokens.size(); ++i)
            if (steps[t - 1]->states[i] != trace::TokenState::Masked) {
                EXPECT_EQ(steps[t]->tokens[i], steps[t - 1]->tokens[i]);
            }
}

TEST(Sampler, DeterministicForASeed) {
    auto r = request(16, 8, 16);
    r.config.temperature = 0.8;
    r.config.seed = 42;
    trace::RunSummary a, b, c;
    run_all(r, &a);
    run_all(r, &b);
    EXPECT_EQ(a.final_tokens, b.final_tokens);
    r.config.seed = 43;
    run_all(r, &c);
    EXPECT_NE(a.final_tokens, c.final_tokens);
}

TEST(Sampler, RandomRemaskingStaysInBlock) {
    auto r = request(16, 4, 16);
    r.config.remasking = Remasking::Random;
    auto steps = run_all(r);
    ASSERT_EQ(steps.size(), 16u);
    const int P = steps[0]->seq_len - 16;
    for (const auto& st : steps) {
        ASSERT_EQ(st->committed.size(), 1u);
        EXPECT_EQ((st->committed[0] - P) / 4, st->block);
    }
}

TEST(Sampler, ThresholdDecodingCommitsConfidentTokensAndAtLeastOne) {
    auto r = request(16, 8, 16);
    r.config.threshold = 0.02;  // a random model is unsure: a low threshold lets several through
    auto steps = run_all(r);
    EXPECT_LE(steps.size(), 16u);
    for (const auto& st : steps) {
        ASSERT_GE(st->committed.size(), 1u);
        if (st->committed.size() > 1) {
            for (int32_t pos : st->committed) {
                EXPECT_GE(st->confidence[static_cast<size_t>(pos)], 0.02f);
            }
        }
    }
    r.config.threshold = 1.0;  // nothing reaches 1: exactly one token per step
    EXPECT_EQ(run_all(r).size(), 16u);
}

TEST(Sampler, FactorDecodingFinishesEveryBlock) {
    auto r = request(16, 8, 16);
    r.config.factor = 1.0;
    trace::RunSummary s;
    auto steps = run_all(r, &s);
    EXPECT_EQ(s.status, trace::RunStatus::Complete);
    for (const auto& st : steps) EXPECT_GE(st->committed.size(), 1u);
}

TEST(Sampler, CertaintyPriorPrefersTokensNextToKnownOnes) {
    auto r = request(16, 16, 16);
    r.config.certainty_prior = true;
    r.config.certainty_sigma = 2.0;
    auto steps = run_all(r);
    const int P = steps[0]->seq_len - 16;
    // With a narrow prior the first commit is next to the prompt, not deep in the block.
    EXPECT_LT(steps[0]->committed[0] - P, 4);
}

TEST(Sampler, ClassifierFreeGuidanceRunsOnlyUncached) {
    auto r = request(8, 8, 8);
    r.config.cfg_scale = 1.5;
    trace::RunSummary s;
    run_all(r, &s);
    EXPECT_EQ(s.status, trace::RunStatus::Complete);
    EXPECT_DOUBLE_EQ(s.flops, s.flops_full);
}

TEST(Sampler, EosSuppressionNeverPredictsEos) {
    auto r = request(16, 8, 16);
    r.config.logits_eos_inf = true;
    trace::RunSummary s;
    auto steps = run_all(r, &s);
    const int32_t eos = static_cast<int32_t>(tiny()->config().eos_token_id);
    for (const auto& st : steps)
        for (int32_t p : st->predicted) EXPECT_NE(p, eos);
}

TEST(Sampler, BadConfigsAreRejectedNamingTheSetting) {
    // The engine names its setting; the CLI turns it into the flag (cli_message).
    auto expect = [](GenerationRequest r, const std::string& setting, const std::string& flag) {
        try {
            Generator g(tiny(), r);
            FAIL() << setting;
        } catch (const InputError& e) {
            EXPECT_EQ(e.setting(), setting) << e.what();
            EXPECT_EQ(cli_message(e).rfind(flag + ": ", 0), 0u) << cli_message(e);
        }
    };
    auto r = request(16, 5, 16);
    expect(r, "block_length", "--block-length");
    r = request(16, 8, 3);
    expect(r, "steps", "--steps");
    r = request(16, 8, 16);
    r.config.temperature = -1;
    expect(r, "temperature", "--temperature");
    r = request(5000, 8, 5000);
    r.config.block_length = 8;
    expect(r, "gen_length", "--gen-length");
    r = request();
    r.policy = "nonsense";
    expect(r, "policy", "--policy");
    r = request();
    r.params = {{"nope", 1}};
    expect(r, "param", "--param");
}

TEST(Sampler, BaselineFlopsEqualFullForwardAndRecordsAreComplete) {
    auto r = request(16, 8, 16);
    trace::RunSummary s;
    auto steps = run_all(r, &s);
    EXPECT_DOUBLE_EQ(s.flops, s.flops_full);
    EXPECT_DOUBLE_EQ(s.recompute_fraction, 1.0);
    for (const auto& st : steps) {
        EXPECT_EQ(st->actions.size(), static_cast<size_t>(st->n_layers * st->seq_len));
        EXPECT_EQ(st->layer_ms.size(), 2u);
        for (auto age : st->cache_age) EXPECT_EQ(age, 0);
    }
    EXPECT_GT(s.wall_ms, 0);
}

TEST(Sampler, AttentionIsRecordedOnlyWhenTheSinkAsks) {
    trace::TraceStore store;
    store.request_attention(1, -1);
    store.request_attention(0, 2);
    auto r = request(8, 8, 4);
    Generator g(tiny(), r, &store);
    g.run();
    auto first = store.step(0, 0);
    ASSERT_EQ(first->attention.size(), 2u);
    for (const auto& a : first->attention) {
        EXPECT_EQ(a.cols, first->seq_len);
        EXPECT_EQ(a.levels.size(), static_cast<size_t>(a.rows * a.cols));
        EXPECT_EQ(a.row_scale.size(), static_cast<size_t>(a.rows));
    }
    trace::TraceStore quiet;
    Generator g2(tiny(), r, &quiet);
    g2.run();
    EXPECT_TRUE(quiet.step(0, 0)->attention.empty());
}

TEST(Sampler, HeadMeanAttentionIsTheMeanOfTheHeads) {
    trace::TraceStore store;
    Generator probe(tiny(), request(8, 8, 4));
    const int32_t H = probe.info().n_heads;
    store.request_attention(1, -1);
    for (int32_t h = 0; h < H; ++h) store.request_attention(1, h);
    Generator g(tiny(), request(8, 8, 4), &store);
    g.run();
    for (int32_t step = 0; step < 4; ++step) {
        const auto rec = store.step(0, step);
        ASSERT_EQ(rec->attention.size(), static_cast<size_t>(H + 1));
        const trace::AttentionMap* mean = nullptr;
        for (const auto& a : rec->attention)
            if (a.head == -1) mean = &a;
        ASSERT_NE(mean, nullptr);
        // 8-bit levels: each value within half a level of its row maximum (plus the heads' own).
        for (int32_t row = 0; row < mean->rows; ++row) {
            double total = 0;
            for (int32_t c = 0; c < mean->cols; ++c) {
                double sum = 0, tolerance = 0.5 / 255 * mean->row_scale[static_cast<size_t>(row)];
                for (const auto& a : rec->attention)
                    if (a.head >= 0) {
                        sum += a.prob(row, c);
                        tolerance += 0.5 / 255 * a.row_scale[static_cast<size_t>(row)] / H;
                    }
                EXPECT_NEAR(mean->prob(row, c), sum / H, tolerance + 1e-7);
                total += mean->prob(row, c);
            }
            // Each query row is a distribution (up to the rounding of its levels).
            EXPECT_NEAR(total, 1.0,
                        mean->cols * 0.5 / 255 * mean->row_scale[static_cast<size_t>(row)] + 1e-5);
        }
    }
}

// The trace worker (a spare core: threads below the core count) and the inline path (threads at
// least the core count) must record the same bytes, step by step, for every map of every layer.
TEST(Sampler, TraceWorkerRecordsTheSameMapsAsInlineQuantisation) {
    auto run = [](int32_t threads) {
        auto store = std::make_unique<trace::TraceStore>();
        store->set_want_all_attention_means(true);
        store->request_attention(1, 0);
        // L ~ 270 rows: the full-row maps (H x L x L) are big enough for the worker.
        auto r = request(256, 256, 8);
        r.threads = threads;
        Generator g(tiny(), r, store.get());
        g.run();
        return store;
    };
    if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: no trace worker";
    {
        Generator probe(tiny(), request(256, 256, 8));
        const int64_t L = probe.info().prompt_len + 256, H = probe.info().n_heads;
        ASSERT_GE(H * L * L, kTraceWorkerMinFloats) << "the test must exercise the worker";
    }
    auto with_worker = run(1);
    auto inline_only = run(static_cast<int32_t>(std::thread::hardware_concurrency()) + 1);
    for (int32_t step = 0; step < 8; ++step) {
        const auto a = with_worker->step(0, step), b = inline_only->step(0, step);
        ASSERT_EQ(a->attention.size(), b->attention.size());
        ASSERT_EQ(a->attention.size(), static_cast<size_t>(a->n_layers + 1));
        for (size_t i = 0; i < a->attention.size(); ++i) {
            EXPECT_EQ(a->attention[i].layer, b->attention[i].layer);
            EXPECT_EQ(a->attention[i].head, b->attention[i].head);
            EXPECT_EQ(a->attention[i].row_index, b->attention[i].row_index);
            EXPECT_EQ(a->attention[i].row_scale, b->attention[i].row_scale);
            EXPECT_EQ(a->attention[i].levels, b->attention[i].levels) << "step " << step;
        }
    }
}

// Logits (M, V) for the row path's test: normal * 3, with the largest logit of every third row
// copied to a higher id (argmax ties), the largest of every fifth row at `excluded_id` (-1 = none),
// -inf at a few ids, and a NaN in row `nan_row` (-1 = none).
torch::Tensor sampler_logits(int64_t M, int64_t V, int64_t nan_row, int64_t excluded_id,
                             uint64_t seed) {
    torch::manual_seed(seed);
    auto lg = torch::randn({M, V}) * 3.0;  // (M, V) float32
    for (int64_t i = 0; i < M; i += 3) {
        const int64_t top = lg[i].argmax().item<int64_t>();
        if (top + 1 < V) lg[i][V - 1] = lg[i][top].item<float>();
    }
    if (excluded_id >= 0)
        for (int64_t i = 1; i < M; i += 5) lg[i][excluded_id] = lg[i].max().item<float>() + 1.0F;
    if (V > 4) lg.select(1, V / 2).index_fill_(0, torch::arange(0, M, 4), -INFINITY);
    if (nan_row >= 0) lg[nan_row][0] = NAN;
    return lg;
}

// Where the row path runs (CPU, argmax, no filters) it gives the tensor ops' predictions: the
// same tokens, top-k ids and argmax ties (lower id), probabilities, margins and entropies to
// float64 rounding; with eos and a suppressed id excluded (eos holding some rows' largest logit),
// -inf logits, any V (vector tails) and one or several row tasks. A NaN row sends the call to the
// tensor path, which defines it.
TEST(Sampler, RowPathEqualsTheTensorOps) {
    for (Remasking mode : {Remasking::LowConfidence, Remasking::TopkMargin, Remasking::Entropy}) {
        for (auto [M, V, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 7, 5},
                               {5, 17, 1},
                               {37, 1024, 5},
                               {40, 3, 5},
                               {2, 1, 5}}) {
            GenerationConfig cfg;
            cfg.remasking = mode;
            cfg.logits_eos_inf = true;
            detail::SamplerInputs in;
            in.cfg = &cfg;
            in.top_k = K;
            in.eos_id = V > 2 ? static_cast<int32_t>(V - 2) : -1;
            in.suppress_id = V > 5 ? 5 : -1;
            std::vector<int32_t> current(static_cast<size_t>(M));
            for (int64_t i = 0; i < M; ++i)
                current[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % V);
            in.current = &current;
            std::vector<int64_t> positions(static_cast<size_t>(M));
            std::iota(positions.begin(), positions.end(), 0);
            for (int64_t nan_row : {int64_t{-1}, M / 2}) {
                const auto lg =
                    sampler_logits(M, V, nan_row, in.eos_id, static_cast<uint64_t>(M * V));
                const auto rows = detail::sample(lg, positions, in);
                const auto ref = detail::sample_with_tensors(lg, positions, in);
                const std::string where = "M " + std::to_string(M) + " V " + std::to_string(V) +
                                          " nan row " + std::to_string(nan_row);
                ASSERT_EQ(rows.top_k, ref.top_k) << where;
                EXPECT_EQ(rows.token, ref.token) << where;
                ASSERT_EQ(rows.topk_ids.size(), ref.topk_ids.size()) << where;
                for (size_t j = 0; j < ref.topk_ids.size(); ++j) {
                    if (nan_row >= 0 &&
                        j / static_cast<size_t>(ref.top_k) == static_cast<size_t>(nan_row))
                        continue;  // NaN in both
                    EXPECT_NEAR(rows.topk_probs[j], ref.topk_probs[j], 1e-15) << where;
                    // Equal logits may come in either order from LibTorch's top-k.
                    const auto row = lg[static_cast<int64_t>(j / static_cast<size_t>(ref.top_k))];
                    if ((row == row[ref.topk_ids[j]]).sum().item<int64_t>() == 1) {
                        EXPECT_EQ(rows.topk_ids[j], ref.topk_ids[j]) << where;
                    }
                }
                for (size_t i = 0; i < static_cast<size_t>(M); ++i) {
                    if (nan_row >= 0 && i == static_cast<size_t>(nan_row)) continue;
                    EXPECT_NEAR(rows.confidence[i], ref.confidence[i], 1e-14)
                        << where << " row " << i;
                    EXPECT_NEAR(rows.entropy[i], ref.entropy[i], 1e-13) << where << " row " << i;
                    EXPECT_NEAR(rows.current_prob[i], ref.current_prob[i], 1e-15) << where;
                    if (V > 2) {
                        EXPECT_NE(rows.token[i], in.eos_id);
                    }
                    if (V > 5) {
                        EXPECT_NE(rows.token[i], in.suppress_id);
                    }
                }
            }
        }
    }
}

// The summary's maximum is the largest logit the softmax takes: an excluded id holding the row's
// largest logit does not count (the softmax's shift, so its precision), whichever pass finds it.
// The softmax sums in one eight-lane vector (AVX-512) have the bits of two four-lane ones (AVX2):
// each lane sums the same logits in the same order. Only on an AVX-512 CPU.
TEST(Sampler, RowSummaryIsTheSameAtAvx512AndAvx2) {
    if (cpu::widest_vector_floats() < 16)
        GTEST_SKIP() << "needs AVX-512 to compare with AVX2 (this CPU: "
                     << cpu::widest_vector_floats() << "-float vectors)";
    for (int64_t V : {int64_t{1}, int64_t{5}, int64_t{8}, int64_t{9}, int64_t{37}, int64_t{1024}}) {
        std::vector<float> x(static_cast<size_t>(V));
        for (int64_t i = 0; i < V; ++i)
            x[static_cast<size_t>(i)] = 9.0F * std::sin(1.3F * float(i));
        if (V > 4) x[3] = -INFINITY;  // a lane the exp leaves at 0
        std::vector<double> row(static_cast<size_t>(V));
        std::vector<int32_t> ids(1);
        std::vector<detail::RowSummary> s;
        for (int floats : {0, 8}) {
            cpu::limit_vector_floats(floats);
            s.push_back(detail::summarize_row(x.data(), V, -1, -1, 1, row.data(), ids.data()));
        }
        cpu::limit_vector_floats(0);
        EXPECT_EQ(s[0].sum, s[1].sum) << "V " << V;
        EXPECT_EQ(s[0].entropy, s[1].entropy) << "V " << V;
    }
}

TEST(Sampler, RowSummaryMaximumSkipsExcludedIds) {
    for (int64_t V : {int64_t{3}, int64_t{8}, int64_t{37}, int64_t{1024}}) {
        std::vector<float> x(static_cast<size_t>(V));
        for (int64_t i = 0; i < V; ++i) x[static_cast<size_t>(i)] = std::sin(0.7F * float(i));
        const auto a = static_cast<int32_t>(V / 2), b = static_cast<int32_t>(V - 1);
        x[static_cast<size_t>(a)] = 50.0F;
        x[static_cast<size_t>(b)] = 40.0F;
        double expected = -INFINITY;
        for (int64_t i = 0; i < V; ++i)
            if (i != a && i != b) expected = std::max(expected, double(x[size_t(i)]));
        std::vector<double> row(static_cast<size_t>(V));
        std::vector<int32_t> ids(1);
        const auto s = detail::summarize_row(x.data(), V, a, b, 1, row.data(), ids.data());
        ASSERT_TRUE(s.finite) << "V " << V;
        EXPECT_EQ(s.max, expected) << "V " << V;
        EXPECT_EQ(row[static_cast<size_t>(ids[0])], expected) << "V " << V;
        const auto only_b = detail::summarize_row(x.data(), V, -1, b, 1, row.data(), ids.data());
        EXPECT_EQ(only_b.max, 50.0) << "V " << V;
        EXPECT_EQ(ids[0], a) << "V " << V;
    }
}

TEST(Policies, NoneIsRegisteredWithItsInfo) {
    const auto* none = find_policy("none");
    ASSERT_NE(none, nullptr);
    EXPECT_TRUE(none->params.empty());
    EXPECT_EQ(list_policies().front().name, "none");
    EXPECT_EQ(find_policy("definitely-not"), nullptr);
}

}  // namespace
}  // namespace cl

#include "engine/trace/trace_store.h"
#include "engine/trace/trace_worker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <thread>

namespace cl::trace {
namespace {

std::shared_ptr<StepRecord> make_step(int run, int step) {
    auto r = std::make_shared<StepRecord>();
    r->run_id = run;
    r->step = step;
    r->seq_len = 4;
    r->n_layers = 2;
    r->actions = {RowAction::Recomputed,    RowAction::KvReused,   RowAction::KvReused,
                  RowAction::Recomputed,    RowAction::Recomputed, RowAction::Recomputed,
                  RowAction::FeatureReused, RowAction::Skipped};
    return r;
}

TEST(TraceStore, AppendsAndQueriesRuns) {
    TraceStore store;
    RunInfo a;
    a.run_id = 1;
    a.policy = "none";
    store.on_run_start(a);
    const auto g0 = store.generation();
    for (int s = 0; s < 5; ++s) store.publish(make_step(1, s));
    EXPECT_GT(store.generation(), g0);
    EXPECT_EQ(store.step_count(1), 5u);
    EXPECT_EQ(store.step(1, 3)->step, 3);
    EXPECT_EQ(store.step(1, 5), nullptr);
    EXPECT_EQ(store.step(2, 0), nullptr);
    RunSummary s;
    s.status = RunStatus::Complete;
    store.on_run_end(1, s);
    EXPECT_EQ(store.run_summary(1)->status, RunStatus::Complete);
    EXPECT_THROW(store.on_run_start(a), std::invalid_argument);
    EXPECT_THROW(store.publish(make_step(9, 0)), std::invalid_argument);
}

TEST(TraceStore, RecomputeFractionCountsRecomputedCells) {
    EXPECT_DOUBLE_EQ(make_step(1, 0)->recompute_fraction(), 4.0 / 8.0);
    EXPECT_DOUBLE_EQ(StepRecord{}.recompute_fraction(), 0.0);
}

TEST(TraceStore, WantsOnlyWhatWasRequested) {
    TraceStore store;
    ProbeRequest att{ProbeKind::Attention, 0, 0, 3, -1};
    EXPECT_TRUE(store.wants({ProbeKind::StepRecord, 0, 0, -1, -1}));
    EXPECT_FALSE(store.wants(att));
    EXPECT_FALSE(store.wants({ProbeKind::Oracle, 0, 0, -1, -1}));
    store.request_attention(3, -1);
    EXPECT_TRUE(store.wants(att));
    att.layer = 2;
    EXPECT_FALSE(store.wants(att));
    store.set_want_all_attention_means(true);
    EXPECT_TRUE(store.wants(att));
    store.set_want_oracle(true);
    EXPECT_TRUE(store.wants({ProbeKind::Oracle, 0, 0, -1, -1}));
}

TEST(TraceStore, ConcurrentAppendAndReadAreSafe) {
    TraceStore store;
    RunInfo a;
    a.run_id = 0;
    store.on_run_start(a);
    std::thread writer([&] {
        for (int s = 0; s < 2000; ++s) store.publish(make_step(0, s));
    });
    size_t seen = 0;
    while (seen < 2000) {
        auto steps = store.steps(0);  // snapshot: no lock held while using it
        for (size_t i = 0; i < steps.size(); ++i) ASSERT_EQ(steps[i]->step, static_cast<int>(i));
        seen = steps.size();
    }
    writer.join();
    EXPECT_EQ(store.step_count(0), 2000u);
}

TEST(TraceStore, FanOutForwardsToEverySink) {
    TraceStore a, b(false);
    FanOutSink fan;
    fan.add(&a);
    fan.add(&b);
    fan.add(nullptr);
    RunInfo info;
    info.run_id = 4;
    fan.on_run_start(info);
    fan.publish(make_step(4, 0));
    EXPECT_EQ(a.step_count(4), 1u);
    EXPECT_EQ(b.step_count(4), 1u);
    EXPECT_FALSE(b.is_live());
    b.request_attention(0, 0);
    EXPECT_TRUE(fan.wants({ProbeKind::Attention, 4, 0, 0, 0}));
}

}  // namespace
}  // namespace cl::trace

namespace cl::trace {
namespace {

TEST(AttentionMap, EightBitLevelsOfTheRowMaximum) {
    AttentionMap a;
    a.rows = 3;
    a.cols = 4;
    const float probs[] = {0.1f, 0.6f, 0.3f, 0.0f,      // an ordinary row
                           NAN,  -1.f, 0.5f, INFINITY,  // junk reads as 0 (inf: the row is 0)
                           0.f,  0.f,  0.f,  0.f};      // an empty row
    a.set_probs(probs);
    ASSERT_EQ(a.levels.size(), 12u);
    EXPECT_FLOAT_EQ(a.row_scale[0], 0.6f);
    EXPECT_EQ(a.levels[1], 255);
    for (int c = 0; c < 4; ++c)  // the nearest level
        EXPECT_LE(std::abs(a.levels[c] - 255.0 * probs[c] / 0.6), 0.5 + 1e-4) << c;
    EXPECT_EQ(a.levels[3], 0);
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(a.prob(0, c), probs[c], 0.5 / 255 * 0.6 + 1e-7) << c;
    EXPECT_EQ(a.row_scale[1], 0.f);
    for (int c = 0; c < 4; ++c) {
        EXPECT_EQ(a.prob(1, c), 0.f) << c;
        EXPECT_EQ(a.prob(2, c), 0.f) << c;
    }
}

// The engine's fused path: the head mean quantised in one pass must equal quantising the float
// mean (the reference), on widths that exercise the SIMD body and the scalar tail, with junk
// values.
TEST(AttentionMap, HeadMeanMatchesQuantisingTheFloatMean) {
    for (int32_t heads : {1, 3, 4}) {
        for (int32_t cols : {1, 15, 16, 17, 451}) {
            const int32_t rows = 5;
            std::vector<float> maps(static_cast<size_t>(heads * rows * cols));
            uint32_t state = 12345u + static_cast<uint32_t>(heads * 1000 + cols);
            for (auto& v : maps) {
                state = state * 1664525u + 1013904223u;
                v = static_cast<float>(state >> 8) / 16777216.f / static_cast<float>(cols);
            }
            if (cols > 16) {
                maps[static_cast<size_t>(2 * cols + 3)] = NAN;        // row 2 of head 0
                maps[static_cast<size_t>(3 * cols + 20)] = -0.5f;     // row 3 of head 0
                maps[static_cast<size_t>(4 * cols + 16)] = INFINITY;  // row 4: reads as 0
            }
            std::vector<float> mean(static_cast<size_t>(rows * cols), 0.f);
            for (int32_t h = 0; h < heads; ++h)
                for (size_t i = 0; i < mean.size(); ++i)
                    mean[i] += maps[static_cast<size_t>(h) * mean.size() + i];
            for (auto& v : mean) v /= static_cast<float>(heads);
            AttentionMap fused, reference;
            fused.rows = reference.rows = rows;
            fused.cols = reference.cols = cols;
            fused.set_head_mean(maps.data(), heads);
            // Scalar reference: the row maximum and the nearest level, written out here.
            reference.row_scale.assign(static_cast<size_t>(rows), 0.f);
            reference.levels.assign(mean.size(), 0);
            for (int32_t r = 0; r < rows; ++r) {
                const float* in = mean.data() + static_cast<size_t>(r * cols);
                float mx = 0.f;
                for (int32_t c = 0; c < cols; ++c)
                    if (in[c] > mx) mx = in[c];
                if (std::isinf(mx)) mx = 0.f;
                reference.row_scale[static_cast<size_t>(r)] = mx;
                for (int32_t c = 0; c < cols; ++c) {
                    const double level = mx > 0 && std::isfinite(in[c]) && in[c] > 0
                                             ? std::min(255.0, 255.0 * in[c] / mx)
                                             : 0.0;
                    reference.levels[static_cast<size_t>(r * cols + c)] =
                        static_cast<uint8_t>(std::lround(level));
                }
            }
            ASSERT_EQ(fused.levels.size(), reference.levels.size());
            for (int32_t r = 0; r < rows; ++r) {
                EXPECT_NEAR(fused.row_scale[static_cast<size_t>(r)],
                            reference.row_scale[static_cast<size_t>(r)], 1e-6f)
                    << heads << " heads, " << cols << " cols, row " << r;
                for (int32_t c = 0; c < cols; ++c) {
                    const size_t i = static_cast<size_t>(r * cols + c);
                    // Summing before dividing may round a value on a level boundary either way.
                    EXPECT_LE(std::abs(int(fused.levels[i]) - int(reference.levels[i])), 1)
                        << heads << " heads, " << cols << " cols, row " << r << " col " << c;
                }
            }
            if (cols > 16) {
                EXPECT_EQ(fused.levels[static_cast<size_t>(2 * cols + 3)], 0);
                EXPECT_EQ(fused.row_scale[4], 0.f);
                for (int32_t c = 0; c < cols; ++c)
                    EXPECT_EQ(fused.levels[static_cast<size_t>(4 * cols + c)], 0);
            }
        }
    }
}

}  // namespace
}  // namespace cl::trace

namespace cl::detail {
namespace {

TEST(TraceWorker, RunsJobsInOrderWaitsAndRethrows) {
    TraceWorker worker;
    std::vector<int> order;
    for (int i = 0; i < 100; ++i) worker.submit([&order, i] { order.push_back(i); });
    worker.wait();
    ASSERT_EQ(order.size(), 100u);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
    worker.submit([] { throw std::runtime_error("job failed"); });
    worker.submit([&order] { order.push_back(100); });  // later jobs still run
    EXPECT_THROW(worker.wait(), std::runtime_error);
    EXPECT_EQ(order.back(), 100);
    EXPECT_NO_THROW(worker.wait());  // the error is reported once
}

TEST(TraceWorker, DestructorFinishesQueuedJobs) {
    std::atomic<int> done{0};
    {
        TraceWorker worker;
        for (int i = 0; i < 50; ++i) worker.submit([&done] { ++done; });
    }
    EXPECT_EQ(done.load(), 50);
}

}  // namespace
}  // namespace cl::detail

namespace cl::trace {
namespace {

// The counted share against a plain count, at sizes around the 16-byte and 255-step blocks.
TEST(StepRecord, RecomputeFractionCountsEveryRecomputedRow) {
    for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{4079}, size_t{4080},
                     size_t{4081}, size_t{40960 + 7}}) {
        StepRecord r;
        r.actions.resize(n);
        size_t want = 0;
        for (size_t i = 0; i < n; ++i) {
            r.actions[i] = static_cast<RowAction>((i * 7 + i / 3) % 5);
            want += r.actions[i] == RowAction::Recomputed;
        }
        EXPECT_DOUBLE_EQ(r.recompute_fraction(), static_cast<double>(want) / n) << n << " rows";
        std::fill(r.actions.begin(), r.actions.end(), RowAction::Recomputed);  // full byte lanes
        EXPECT_DOUBLE_EQ(r.recompute_fraction(), 1.0) << n << " rows";
    }
}

}  // namespace
}  // namespace cl::trace

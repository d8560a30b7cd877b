#include "engine/trace/trace_store.h"

#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace cl::trace

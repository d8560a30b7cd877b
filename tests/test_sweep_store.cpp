// The sweep results file, the metrics of a point against its baseline and the frontier, on
// constructed points (no model): round trips, resume rules, claims, merges and bad files.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sweep/frontier.h"
#include "sweep/point_metrics.h"
#include "sweep/sweep_store.h"

namespace cl::sweep {
namespace {

std::filesystem::path temp_file(const std::string& name) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    auto dir = std::filesystem::path(::testing::TempDir()) / "cachelens-tests" /
               (std::string(info->test_suite_name()) + "." + info->name() + "." +
                std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir / name;
}

ItemResult item(const std::string& family, int index, bool correct, double wall_ms, double flops,
                std::vector<int32_t> tokens) {
    return {family, index, correct, 4, wall_ms, flops, 100.0, 2, std::move(tokens)};
}

PointResult point(int index, const std::string& policy, std::map<std::string, double> params,
                  std::vector<ItemResult> items) {
    PointResult p;
    p.index = index;
    p.model = "default";
    p.policy = policy;
    p.params = std::move(params);
    p.key = point_key(p.model, p.device, p.policy, p.params);
    p.threads = 2;
    p.host = "test-host";
    p.finished_utc = "2026-11-23T00:00:00Z";
    p.items = std::move(items);
    return p;
}

PointResult baseline() {
    return point(0, "none", {},
                 {item("arith", 0, true, 100, 100, {1, 2, 3, 4}),
                  item("arith", 1, false, 100, 100, {1, 2, 5, 6})});
}

PointResult cached(int index, double gamma, bool second_correct) {
    return point(index, "elastic", {{"gamma", gamma}},
                 {item("arith", 0, false, 40, 25, {1, 2, 3, 9}),
                  item("arith", 1, second_correct, 60, 25, {1, 2, 5, 6})});
}

TEST(SweepStore, PointsRoundTripWithEveryField) {
    const auto path = temp_file("r.clsweep").string();
    auto store = SweepStore::create_or_resume(path, R"({"a":1})", 3);
    store->add_point(baseline());
    store->add_point(cached(1, 0.5, true));
    store.reset();
    auto r = SweepStore::open(path);
    EXPECT_EQ(r->info().format_version, kSweepFormatVersion);
    EXPECT_EQ(r->info().total_points, 3);
    EXPECT_EQ(r->info().spec_json, R"({"a":1})");
    const auto points = r->points();
    ASSERT_EQ(points.size(), 2u);
    const auto& p = points[1];
    const auto want = cached(1, 0.5, true);
    EXPECT_EQ(p.key, want.key);
    EXPECT_EQ(p.policy, "elastic");
    EXPECT_EQ(p.params, want.params);
    EXPECT_EQ(p.threads, 2);
    EXPECT_EQ(p.host, "test-host");
    ASSERT_EQ(p.items.size(), 2u);
    EXPECT_EQ(p.items[0].final_tokens, want.items[0].final_tokens);
    EXPECT_EQ(p.items[1].correct, true);
    EXPECT_DOUBLE_EQ(p.items[0].wall_ms, 40);
    EXPECT_DOUBLE_EQ(p.items[0].flops_full, 100);
    EXPECT_EQ(p.items[0].prompt_len, 2);
    EXPECT_EQ(r->finished_keys().size(), 2u);
}

TEST(SweepStore, ResumesTheSameSpecAndRefusesAnother) {
    const auto path = temp_file("r.clsweep").string();
    SweepStore::create_or_resume(path, R"({"a":1})", 2)->add_point(baseline());
    auto again = SweepStore::create_or_resume(path, R"({"a":1})", 2);
    EXPECT_EQ(again->finished_keys().size(), 1u);
    again.reset();
    try {
        SweepStore::create_or_resume(path, R"({"a":2})", 2);
        FAIL() << "another spec was accepted";
    } catch (const SweepFileError& e) {
        EXPECT_NE(std::string(e.what()).find("another spec"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    EXPECT_EQ(SweepStore::open(path)->points().size(), 1u);  // nothing lost
}

TEST(SweepStore, ClaimsHandOutEachUnfinishedPointOnce) {
    const auto path = temp_file("r.clsweep").string();
    auto a = SweepStore::create_or_resume(path, "{}", 3);
    auto b = SweepStore::create_or_resume(path, "{}", 3);
    a->add_point(baseline());  // index 0 finished
    const std::vector<std::pair<int32_t, std::string>> all = {
        {0, baseline().key}, {1, "k1"}, {2, "k2"}};
    EXPECT_EQ(a->claim_next(all, "a"), 1);
    EXPECT_EQ(b->claim_next(all, "b"), 2);
    EXPECT_EQ(a->claim_next(all, "a"), std::nullopt);
    b->clear_claims();
    EXPECT_EQ(b->claim_next(all, "b"), 1);
}

TEST(SweepStore, MergeJoinsShardsOfOneSpecOnly) {
    const auto dir = temp_file("x").parent_path();
    const auto s0 = (dir / "s0").string(), s1 = (dir / "s1").string(), other = (dir / "o").string();
    SweepStore::create_or_resume(s0, "{}", 3)->add_point(baseline());
    auto sh1 = SweepStore::create_or_resume(s1, "{}", 3);
    sh1->add_point(cached(1, 0.5, true));
    sh1->add_point(baseline());  // in both shards: taken once
    sh1.reset();
    merge_sweep_files({s0, s1}, (dir / "m").string());
    EXPECT_EQ(SweepStore::open((dir / "m").string())->points().size(), 2u);
    EXPECT_THROW(merge_sweep_files({s0, s1}, (dir / "m").string()), SweepFileError);  // exists
    SweepStore::create_or_resume(other, R"({"b":1})", 3);
    EXPECT_THROW(merge_sweep_files({s0, other}, (dir / "m2").string()), SweepFileError);
    EXPECT_FALSE(std::filesystem::exists(dir / "m2"));
}

TEST(SweepStore, BadFilesAreRefusedNamingTheFile) {
    const auto path = temp_file("bad.clsweep");
    std::ofstream(path) << "not a database at all, just text of some length";
    for (auto open : {+[](const std::string& p) { SweepStore::open(p); },
                      +[](const std::string& p) { SweepStore::create_or_resume(p, "{}", 1); }}) {
        try {
            open(path.string());
            FAIL() << "a text file was accepted";
        } catch (const SweepFileError& e) {
            EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos);
            EXPECT_NE(std::string(e.what()).find("not a CacheLens sweep"), std::string::npos);
        }
    }
    EXPECT_THROW(SweepStore::open((path.parent_path() / "missing").string()), SweepFileError);
}

// Edits a results file behind the store's back with SQLite itself.
void sql(const std::string& path, const std::string& statement) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, statement.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
}

TEST(SweepStore, NewerAndCorruptFilesAreRefusedWithTheReason) {
    const auto path = temp_file("r.clsweep").string();
    SweepStore::create_or_resume(path, "{}", 1)->add_point(baseline());
    sql(path, "UPDATE item SET final_tokens = '[1, oops' WHERE idx = 1");
    try {
        SweepStore::open(path)->points();
        FAIL() << "corrupt item accepted";
    } catch (const SweepFileError& e) {
        EXPECT_NE(std::string(e.what()).find("arith #1"), std::string::npos) << e.what();
    }
    sql(path, "UPDATE meta SET value = '99' WHERE key = 'format_version'");
    try {
        SweepStore::open(path);
        FAIL() << "newer format accepted";
    } catch (const SweepFileError& e) {
        EXPECT_NE(std::string(e.what()).find("v99"), std::string::npos) << e.what();
    }
}

TEST(PointMetrics, AgainstTheBaselineOnTheSameItems) {
    const std::vector<PointResult> points = {baseline(), cached(1, 0.5, true)};
    ASSERT_EQ(baseline_of(points, points[1]), &points[0]);
    const auto m = point_metrics(points[1], &points[0]);
    EXPECT_EQ(m.items, 2);
    EXPECT_EQ(m.correct, 1);
    EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
    EXPECT_LT(m.accuracy_lo, 0.5);
    EXPECT_GT(m.accuracy_hi, 0.5);
    EXPECT_DOUBLE_EQ(m.speedup, 2.0);     // 200 ms vs 100 ms
    EXPECT_DOUBLE_EQ(m.flop_ratio, 4.0);  // 200 vs 50 FLOPs
    EXPECT_DOUBLE_EQ(m.efficiency, 0.5);
    EXPECT_DOUBLE_EQ(m.agreement, 0.75);  // item 0: 1 of 2 response tokens, item 1: 2 of 2
    EXPECT_EQ(m.fixed, 1);
    EXPECT_EQ(m.broken, 1);
    EXPECT_DOUBLE_EQ(m.tokens_per_s, 8 / 0.1);  // 2 x 4 tokens in 100 ms
    const auto b = point_metrics(points[0], &points[0]);
    EXPECT_DOUBLE_EQ(b.speedup, 1.0);
    EXPECT_DOUBLE_EQ(b.agreement, 1.0);
    EXPECT_TRUE(std::isnan(point_metrics(points[1], nullptr).speedup));
}

TEST(Frontier, KeepsExactlyTheUndominatedPoints) {
    //            fast+bad   slow+good   dominated   tie of #1
    const std::vector<FrontierInput> pts = {{100, 0.5}, {10, 0.9}, {50, 0.4}, {10, 0.9}, {60, 0.7}};
    EXPECT_EQ(pareto_front(pts), (std::vector<size_t>{0, 4, 1, 3}));
    EXPECT_TRUE(pareto_front({}).empty());
}

}  // namespace
}  // namespace cl::sweep

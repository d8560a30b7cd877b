// The record schema (sessions/record_schema.h): every field of every record survives a session
// file and JSON; the SQL tables, the per-step CSV and docs/session-format.md agree with the
// field tables; old files (the bundled lessons, a v1 file) still open.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "sessions/record_schema.h"
#include "sessions/schema.h"
#include "sessions/session_reader.h"
#include "sessions/session_writer.h"
#include "sessions/step_csv.h"
#include "test_util.h"

namespace cl::sessions {
namespace {

using trace::RunInfo;
using trace::RunSummary;
using trace::StepRecord;

// A new member of a record must be added to record_schema's tables (and filled below): these
// sizes catch one that was not (libstdc++ on x86-64, where CI runs).
#if defined(__x86_64__) && defined(__GLIBCXX__)
static_assert(sizeof(RunInfo) == 552, "RunInfo changed: update record_schema and this test");
static_assert(sizeof(StepRecord) == 656, "StepRecord changed: update record_schema and this test");
static_assert(sizeof(RunSummary) == 112, "RunSummary changed: update record_schema and this test");
static_assert(sizeof(trace::TriggerEvent) == 96, "TriggerEvent changed: update record_schema");
#endif

constexpr int kL = 9, kN = 3;

RunInfo full_info() {
    RunInfo i;
    i.run_id = 7;
    i.policy = "elastic";
    i.policy_params = {{"gamma", "0.9"}, {"refresh", "depth"}};
    i.sampler = {{"gen_length", "5"}, {"temperature", "1"}};
    i.model_name = "tiny";
    i.model_hash = "abc123";
    i.device = "cuda:1";
    i.dtype = "bf16";
    i.kernels = "reference";
    i.noise_process = "uniform";
    i.architecture = "dream";
    i.threads = 3;
    i.seed = 0xfedcba9876543210ull;  // above 2^63: kept bit for bit through SQLite's int64
    i.prompt_text = "Caf\xc3\xa9, \"quoted\"\nline";
    i.prompt_len = 4;
    i.gen_len = 5;
    i.block_len = 5;
    i.steps = 6;
    i.n_layers = kN;
    i.n_heads = 2;
    i.attention_tile = 3;
    i.mask_id = 99;
    i.eos_id = 98;
    i.initial_tokens = {1, 2, 3, 4, 99, 99, 99, 99, 99};
    i.token_text = {{99, "<|mask|>"}, {-1, "neg"}, {1, "a"}};
    i.app_version = "9.9";
    return i;
}

StepRecord full_step(std::mt19937& rng) {
    std::uniform_real_distribution<float> u(0.f, 1.f);
    StepRecord r;
    r.run_id = 7;
    r.step = 2;
    r.block = 1;
    r.step_in_block = 1;
    r.seq_len = kL;
    r.n_layers = kN;
    for (int i = 0; i < kL; ++i) {
        r.tokens.push_back(static_cast<int32_t>(rng() % 100));
        r.states.push_back(static_cast<trace::TokenState>(i % 4));
        r.predicted.push_back(i % 3 ? static_cast<int32_t>(rng() % 100) : -1);
        r.confidence.push_back(i % 3 ? u(rng) : NAN);
        r.entropy.push_back(i % 3 ? u(rng) : NAN);
        r.margin.push_back(u(rng));
        for (int k = 0; k < StepRecord::kTopK; ++k) {
            r.topk_ids.push_back(static_cast<int32_t>(rng() % 100));
            r.topk_probs.push_back(u(rng));
        }
    }
    r.committed = {6, 4};
    r.new_token_text = {{42, "forty-two"}};
    for (int k = 0; k < kN * kL; ++k) {
        r.actions.push_back(static_cast<trace::RowAction>(k % 5));
        r.cache_age.push_back(static_cast<uint16_t>(rng() % 60000));
        r.oracle.k_cos.push_back(u(rng));
        r.oracle.v_cos.push_back(k % 4 ? u(rng) : NAN);
        r.oracle.k_rel_l2.push_back(u(rng));
        r.oracle.v_rel_l2.push_back(u(rng));
        r.drift.k_cos.push_back(k % 3 ? u(rng) : NAN);
        r.drift.v_cos.push_back(u(rng));
        r.drift.k_rel_l2.push_back(u(rng));
        r.drift.v_rel_l2.push_back(k % 3 ? u(rng) : NAN);
    }
    trace::TriggerEvent fired{"drift", 2, 5, 0.25, 0.5, true, "recompute layers 2..2"};
    trace::TriggerEvent quiet{"interval", -1, -1, NAN, 8, false, ""};
    r.triggers = {fired, quiet};
    trace::AttentionMap m;
    m.layer = 1;
    m.head = -1;
    m.rows = 2;
    m.cols = kL;
    m.row_index = {4, 6};
    std::vector<float> probs(2 * kL);
    for (float& p : probs) p = u(rng);
    m.set_probs(probs.data());
    r.attention = {m};
    r.wall_ms = 12.5;
    r.layer_ms = {1.f, 2.5f, 3.25f};
    r.flops = 1.5e9;
    r.flops_full = 3e9;
    r.has_oracle = true;
    r.oracle.logits_kl = 0.0625;
    r.oracle.commit_differs = true;
    r.has_drift = true;
    return r;
}

RunSummary full_summary() {
    RunSummary s;
    s.status = trace::RunStatus::Complete;
    s.steps = 6;
    s.generated_tokens = 4;
    s.wall_ms = 99.5;
    s.tokens_per_s = 40.25;
    s.flops = 1e10;
    s.flops_full = 2e10;
    s.recompute_fraction = 0.375;
    s.final_tokens = {1, 2, 3};
    s.final_text = "done";
    return s;
}

// Every field of the filled records differs from a default-constructed one, so a round trip that
// drops a field cannot pass by luck.
TEST(RecordSchema, TestRecordsFillEveryField) {
    std::mt19937 rng(1);
    const StepRecord full = full_step(rng), empty;
    for (const auto& f : step_fields())
        EXPECT_NE(f.get(full).dump(), f.get(empty).dump()) << "step field " << f.name;
    for (const auto& a : step_arrays())
        EXPECT_NE(a.to_json(full).dump(), a.to_json(empty).dump()) << "array " << a.name;
    const RunInfo info = full_info();
    for (const auto& f : run_fields())
        EXPECT_NE(f.get(info).dump(), f.get(RunInfo{}).dump()) << "run field " << f.name;
    for (const auto& f : summary_fields())
        EXPECT_NE(f.get(full_summary()).dump(), f.get(RunSummary{}).dump()) << f.name;
}

void expect_same_fields(const StepRecord& got, const StepRecord& want) {
    for (const auto& f : step_fields())
        EXPECT_EQ(f.get(got).dump(), f.get(want).dump()) << "step field " << f.name;
    for (const auto& a : step_arrays())
        EXPECT_EQ(a.to_json(got).dump(), a.to_json(want).dump()) << "array " << a.name;
}

TEST(RecordSchema, EveryFieldSurvivesJson) {
    std::mt19937 rng(2);
    const StepRecord want = full_step(rng);
    StepRecord got;
    from_json(json::parse(to_json(want, true).dump()), got);
    expect_same_fields(got, want);
    ASSERT_EQ(got.attention.size(), 1u);
    EXPECT_EQ(got.attention[0].levels, want.attention[0].levels);
    EXPECT_EQ(got.attention[0].row_scale, want.attention[0].row_scale);

    RunInfo info;
    from_json(json::parse(to_json(full_info()).dump()), info);
    EXPECT_EQ(to_json(info), to_json(full_info()));
    RunSummary summary;
    from_json(json::parse(to_json(full_summary()).dump()), summary);
    EXPECT_EQ(to_json(summary), to_json(full_summary()));
}

TEST(RecordSchema, EveryFieldSurvivesASessionFile) {
    const auto path = (test::temp_dir("schema") / "all.clsession").string();
    std::mt19937 rng(3);
    StepRecord want = full_step(rng);
    WriterOptions options;
    options.attention_bits = 8;
    {
        auto w = SessionWriter::open(path, options);
        w->on_run_start(full_info());
        w->publish(std::make_shared<StepRecord>(want));
        w->on_run_end(7, full_summary());
        ASSERT_TRUE(w->flush()) << w->error();
    }
    auto r = SessionReader::open(path);
    const auto runs = r->runs();
    ASSERT_EQ(runs.size(), 1u);
    RunInfo info = full_info();
    info.run_id = static_cast<int32_t>(runs[0].run_id);  // the session numbers its runs
    EXPECT_EQ(to_json(runs[0].info), to_json(info));
    ASSERT_TRUE(runs[0].summary.has_value());
    EXPECT_EQ(to_json(*runs[0].summary), to_json(full_summary()));
    const auto got = r->load_step(runs[0].run_id, want.step);
    want.run_id = info.run_id;
    expect_same_fields(*got, want);
    ASSERT_EQ(got->attention.size(), 1u);  // 8-bit levels, floored below 6/255 of the row max
    for (size_t k = 0; k < want.attention[0].levels.size(); ++k)
        EXPECT_EQ(got->attention[0].levels[k],
                  want.attention[0].levels[k] < 6 ? 0 : want.attention[0].levels[k]);
}

std::set<std::string> table_columns(const std::string& path, const std::string& table) {
    Db db(path, SQLITE_OPEN_READONLY);
    Stmt s(db, "SELECT name FROM pragma_table_info('" + table + "')");
    std::set<std::string> out;
    while (s.step()) out.insert(s.col_text(0));
    return out;
}

template <typename Record>
std::set<std::string> field_columns(const std::vector<Field<Record>>& fields) {
    std::set<std::string> out;
    for (const auto& f : fields)
        if (f.column != Column::None) out.insert(std::string(f.sql_name()));
    return out;
}

TEST(RecordSchema, SqlTablesHoldExactlyTheFieldColumns) {
    const auto path = (test::temp_dir("schema") / "cols.clsession").string();
    SessionWriter::open(path)->flush();
    auto step = field_columns(step_fields());
    step.insert("run_id");
    EXPECT_EQ(table_columns(path, "step"), step);
    auto run = field_columns(run_fields());
    for (const char* c :
         {"run_id", "comparison_id", "status", "started_utc", "ended_utc", "summary_json", "note"})
        run.insert(c);  // the session's own bookkeeping of a run
    EXPECT_EQ(table_columns(path, "run"), run);
}

TEST(RecordSchema, DocumentMatchesTheTables) {
    const std::string doc =
        test::read_file(std::filesystem::path(CL_SOURCE_DIR) / "docs" / "session-format.md");
    const std::string begin = "<!-- generated: record schema -->\n",
                      end = "<!-- end of generated section -->";
    const size_t a = doc.find(begin), b = doc.find(end);
    ASSERT_NE(a, std::string::npos) << "docs/session-format.md lacks the generated section";
    ASSERT_NE(b, std::string::npos);
    EXPECT_EQ(doc.substr(a + begin.size(), b - a - begin.size()), "\n" + schema_markdown() + "\n")
        << "regenerate it with: cachelens-cli sessions schema";
}

TEST(RecordSchema, UnknownOrMistypedJsonIsAnErrorNamingTheKey) {
    StepRecord r;
    try {
        from_json(json{{"step", 1}, {"wal_ms", 2.0}}, r);
        FAIL() << "unknown key accepted";
    } catch (const SessionError& e) {
        EXPECT_NE(std::string(e.what()).find("wal_ms"), std::string::npos) << e.what();
    }
    try {
        from_json(json{{"block", "three"}}, r);
        FAIL() << "mistyped value accepted";
    } catch (const SessionError& e) {
        EXPECT_NE(std::string(e.what()).find("block"), std::string::npos) << e.what();
    }
    EXPECT_THROW(from_json(json{{"states", {0, 1, 9}}}, r), SessionError);  // no state 9
    // An attention map's integer arrays: a float that does not fit (a cast would be undefined
    // behaviour) or a level above 255 is refused, not converted.
    const json map = {{"layer", 0},       {"head", -1},         {"rows", 1},       {"cols", 2},
                      {"row_index", {0}}, {"row_scale", {1.0}}, {"levels", {3, 4}}};
    trace::AttentionMap m;
    from_json(map, m);
    EXPECT_EQ(m.levels, (std::vector<uint8_t>{3, 4}));
    for (const auto& [key, bad] : std::vector<std::pair<std::string, json>>{
             {"row_index", {-8.9e67}}, {"row_index", {0.5}}, {"levels", {3, 256}}}) {
        json broken = map;
        broken[key] = bad;
        EXPECT_THROW(from_json(broken, m), SessionError) << key << " = " << bad.dump();
    }
}

TEST(RecordSchema, AnUnknownStoredArrayIsAnErrorNamingIt) {
    const auto path = (test::temp_dir("schema") / "unknown.clsession").string();
    std::mt19937 rng(5);
    StepRecord step = full_step(rng);
    step.step = 0;  // check() walks steps 0..n-1
    {
        auto w = SessionWriter::open(path);
        w->on_run_start(full_info());
        w->publish(std::make_shared<StepRecord>(step));
        w->on_run_end(7, full_summary());
        ASSERT_TRUE(w->flush());
    }
    {
        Db db(path, SQLITE_OPEN_READWRITE);
        db.exec(
            "INSERT INTO array SELECT run_id, step, 'mystery', dtype, shape, encoding, data "
            "FROM array WHERE name = 'tokens'");
    }
    auto r = SessionReader::open(path);
    const auto problems = r->check();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("unknown array 'mystery'"), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find("unknown.clsession"), std::string::npos) << problems[0];
}

TEST(RecordSchema, OneStepCsvFromRecordsAndFromTheStepTable) {
    const auto path = (test::temp_dir("schema") / "csv.clsession").string();
    std::mt19937 rng(4);
    const StepRecord step = full_step(rng);
    {
        auto w = SessionWriter::open(path);
        w->on_run_start(full_info());
        w->publish(std::make_shared<StepRecord>(step));
        w->on_run_end(7, full_summary());
        ASSERT_TRUE(w->flush());
    }
    auto r = SessionReader::open(path);
    const auto run = r->runs().at(0);
    std::ostringstream from_records, from_table;
    write_step_csv_header(from_records);
    write_step_csv_row(from_records, run.run_id, "elastic", step_scalars_json(step));
    write_step_csv_header(from_table);
    for (const auto& row : r->step_scalars(run.run_id))
        write_step_csv_row(from_table, run.run_id, "elastic", row);
    EXPECT_EQ(from_records.str(), from_table.str());
    const std::string csv = from_table.str();
    EXPECT_EQ(csv.substr(0, csv.find('\n')),
              "run_id,policy,step,block,step_in_block,seq_len,n_layers,wall_ms,flops,flops_full,"
              "recompute_fraction,n_committed,has_oracle,oracle_logits_kl,oracle_commit_differs,"
              "has_drift");
    EXPECT_NE(csv.find(",12.5,"), std::string::npos) << csv;
}

TEST(RecordSchema, BundledLessonSessionsStillOpen) {
    const auto dir = std::filesystem::path(CL_SOURCE_DIR) / "assets" / "lessons";
    int opened = 0, with_sweeps = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (e.path().extension() != ".clsession") continue;
        const auto bytes = test::read_file(e.path());
        auto r = SessionReader::open(e.path().string(), false);
        EXPECT_EQ(r->check(), std::vector<std::string>{}) << e.path();
        EXPECT_FALSE(r->runs().empty());
        // Older lessons (v2) opened without write access are migrated in memory.
        EXPECT_GE(r->info().schema_version_found, 2) << e.path();
        EXPECT_EQ(r->info().schema_version, kCurrentSchema);
        std::set<std::string> noise;
        for (const auto& run : r->runs()) noise.insert(run.info.noise_process);
        if (r->info().schema_version_found < 3) {
            EXPECT_EQ(noise, std::set<std::string>{"masked"});
        }
        with_sweeps += !r->accuracy_sweeps().empty();
        r.reset();
        EXPECT_EQ(test::read_file(e.path()), bytes) << e.path() << " was modified by a read";
        ++opened;
    }
    EXPECT_GE(opened, 4);
    EXPECT_GE(with_sweeps, 1);  // the noise-agnostic lesson's accuracy-vs-steps report
}

}  // namespace
}  // namespace cl::sessions

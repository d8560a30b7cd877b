// Sessions: round trips, migrations, crashes and bad files. Real SQLite files in a temp folder.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "sessions/blob_codec.h"
#include "sessions/reports.h"
#include "sessions/schema.h"
#include "sessions/session_reader.h"
#include "sessions/session_writer.h"
#include "test_util.h"

namespace cl::sessions {
namespace {

trace::RunSummary complete_summary() {
    trace::RunSummary s;
    s.status = trace::RunStatus::Complete;
    return s;
}

trace::RunInfo make_info(int32_t run_id, const std::string& policy, int L = 12, int N = 3) {
    trace::RunInfo i;
    i.run_id = run_id;
    i.policy = policy;
    i.policy_params = {{"refresh_interval", "8"}};
    i.sampler = {{"gen_length", "8"}, {"seed", "3"}};
    i.model_name = "tiny";
    i.model_hash = "0123456789abcdef";
    i.device = "cpu";
    i.threads = 2;
    i.seed = 3;
    i.prompt_text = "Caf\xc3\xa9 prompt";
    i.prompt_len = 4;
    i.gen_len = L - 4;
    i.block_len = 4;
    i.steps = 8;
    i.n_layers = N;
    i.n_heads = 2;
    i.mask_id = 99;
    i.eos_id = 98;
    i.initial_tokens.assign(static_cast<size_t>(L), 99);
    i.token_text = {{99, "<|mdm_mask|>"}, {1, "a"}};
    i.app_version = "test";
    return i;
}

std::shared_ptr<trace::StepRecord> make_step(int32_t run_id, int32_t step, int L = 12, int N = 3,
                                             bool oracle = false) {
    auto r = std::make_shared<trace::StepRecord>();
    r->run_id = run_id;
    r->step = step;
    r->block = step / 4;
    r->step_in_block = step % 4;
    r->seq_len = L;
    r->n_layers = N;
    for (int i = 0; i < L; ++i) {
        r->tokens.push_back(i < 4 + step ? i : 99);
        r->states.push_back(i < 4          ? trace::TokenState::Prompt
                            : i < 4 + step ? trace::TokenState::DecodedEarlier
                                           : trace::TokenState::Masked);
        r->predicted.push_back(i >= 4 + step ? 7 : -1);
        r->confidence.push_back(i >= 4 + step ? 0.5f + 0.01f * i : NAN);
    }
    r->committed = {4 + step % (L - 4)};
    for (int k = 0; k < N * L; ++k) {
        r->actions.push_back(static_cast<trace::RowAction>(k % 5));
        r->cache_age.push_back(static_cast<uint16_t>(k % 7));
    }
    r->layer_ms = std::vector<float>(static_cast<size_t>(N), 0.25f);
    r->wall_ms = 1.5 + step;
    r->flops = 1e6;
    r->flops_full = 2e6;
    r->new_token_text = {{step, "t" + std::to_string(step)}};
    trace::TriggerEvent e;
    e.kind = "drift";
    e.layer = 1;
    e.value = 0.8;
    e.threshold = 0.9;
    e.fired = true;
    e.action = "recompute";
    r->triggers = {e};
    trace::AttentionMap a;
    a.layer = 1;
    a.head = -1;
    a.rows = 2;
    a.cols = L;
    a.row_index = {4, 5};
    std::vector<float> probs;
    for (int k = 0; k < 2 * L; ++k) probs.push_back(k % L == 0 ? 0.5f : 0.5f / (L - 1));
    a.set_probs(probs.data());
    r->attention = {a};
    if (oracle) {
        r->has_oracle = true;
        r->oracle.k_cos = r->oracle.v_cos = r->oracle.k_rel_l2 = r->oracle.v_rel_l2 =
            std::vector<float>(static_cast<size_t>(N * L), 0.99f);
        r->oracle.logits_kl = 0.125;
        r->oracle.commit_differs = true;
    }
    return r;
}

void write_session(const std::string& path, int runs, int steps, WriterOptions o = {}) {
    auto w = SessionWriter::open(path, o);
    for (int run = 0; run < runs; ++run) {
        w->on_run_start(make_info(run, "policy" + std::to_string(run)));
        for (int s = 0; s < steps; ++s) w->publish(make_step(run, s, 12, 3, s % 2 == 0));
        trace::RunSummary sum;
        sum.status = trace::RunStatus::Complete;
        sum.steps = steps;
        sum.tokens_per_s = 42;
        sum.final_text = "done";
        w->on_run_end(run, sum);
    }
    ASSERT_TRUE(w->flush()) << w->error();
}

std::string open_error(const std::string& path) {
    try {
        SessionReader::open(path);
    } catch (const SessionError& e) {
        return e.what();
    }
    return "";
}

// rowmax-uN round trip of a record's 8-bit levels: rowmax-u8 keeps them exactly except that values
// below 6/255 of the row maximum read as 0; rowmax-u4 keeps them within half a 4-bit level.
void expect_quantised(const trace::AttentionMap& got, const trace::AttentionMap& want, int bits) {
    ASSERT_EQ(got.levels.size(), want.levels.size());
    ASSERT_EQ(got.row_scale, want.row_scale);
    for (size_t i = 0; i < want.levels.size(); ++i) {
        const int w = want.levels[i], g = got.levels[i];
        if (bits == 8)
            EXPECT_EQ(g, w < 6 ? 0 : w) << i;
        else
            EXPECT_LE(std::abs(g - w), 9) << i;  // half of 17 levels, rounded up
    }
    const size_t cols = static_cast<size_t>(want.cols);
    for (size_t row = 0; row < static_cast<size_t>(want.rows); ++row)
        for (size_t c = 0; c < cols; ++c)
            EXPECT_NEAR(got.prob(static_cast<int32_t>(row), static_cast<int32_t>(c)),
                        want.prob(static_cast<int32_t>(row), static_cast<int32_t>(c)),
                        want.row_scale[row] * (bits == 4 ? 9.0 : 6.0) / 255 + 1e-7);
}

TEST(BlobCodec, RoundTripsEveryDtypeRawAndCompressed) {
    for (bool z : {false, true}) {
        std::vector<float> f(1000);
        for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i % 13) * 0.5f;
        auto e = encode_array(f, {10, 100}, z);
        EXPECT_EQ(e.shape, "10,100");
        EXPECT_EQ(e.encoding, z ? "zstd" : "raw");
        EXPECT_EQ(decode_array<float>(e.dtype, e.shape, e.encoding, e.data.data(), e.data.size()),
                  f);
        std::vector<uint16_t> u{1, 2, 65535};
        auto eu = encode_array(u, {3}, z);
        EXPECT_EQ(
            decode_array<uint16_t>(eu.dtype, eu.shape, eu.encoding, eu.data.data(), eu.data.size()),
            u);
    }
}

TEST(BlobCodec, RejectsCorruptBlobs) {
    std::vector<int32_t> v(100, 7);
    auto e = encode_array(v, {100}, true);
    EXPECT_THROW(decode_array<float>(e.dtype, e.shape, e.encoding, e.data.data(), e.data.size()),
                 SessionError);  // dtype
    EXPECT_THROW(decode_array<int32_t>(e.dtype, "101", e.encoding, e.data.data(), e.data.size()),
                 SessionError);  // size
    EXPECT_THROW(decode_array<int32_t>(e.dtype, "1,-2", e.encoding, e.data.data(), e.data.size()),
                 SessionError);  // shape
    EXPECT_THROW(decode_array<int32_t>(e.dtype, "100", "lz4", e.data.data(), e.data.size()),
                 SessionError);  // encoding
    auto bad = e.data;
    bad[bad.size() / 2] ^= 0xff;
    bad.resize(bad.size() - 3);
    EXPECT_THROW(decode_array<int32_t>(e.dtype, e.shape, e.encoding, bad.data(), bad.size()),
                 SessionError);
    EXPECT_THROW(decode_array<uint8_t>("u8", "99999999,99999999", "raw", nullptr, 0),
                 SessionError);  // bomb
}

TEST(Sessions, RecordReadRoundTripIsIdentical) {
    const auto path = (test::temp_dir("s") / "a.clsession").string();
    write_session(path, 2, 6);
    auto r = SessionReader::open(path);
    EXPECT_EQ(r->info().schema_version, kCurrentSchema);
    auto runs = r->runs();
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[1].info.policy, "policy1");
    EXPECT_EQ(runs[0].info.prompt_text, "Caf\xc3\xa9 prompt");
    EXPECT_EQ(runs[0].info.policy_params.at("refresh_interval"), "8");
    EXPECT_EQ(runs[0].info.model_hash, "0123456789abcdef");
    EXPECT_EQ(runs[0].info.threads, 2);
    EXPECT_EQ(runs[0].info.initial_tokens, make_info(0, "x").initial_tokens);
    EXPECT_EQ(runs[0].status, trace::RunStatus::Complete);
    EXPECT_EQ(runs[0].summary->final_text, "done");
    EXPECT_EQ(runs[0].step_count, 6);
    for (int s = 0; s < 6; ++s) {
        auto want = make_step(0, s, 12, 3, s % 2 == 0);
        auto got = r->load_step(runs[0].run_id, s);
        EXPECT_EQ(got->tokens, want->tokens);
        EXPECT_EQ(got->states, want->states);
        EXPECT_EQ(got->predicted, want->predicted);
        EXPECT_EQ(got->committed, want->committed);
        EXPECT_EQ(got->actions, want->actions);
        EXPECT_EQ(got->cache_age, want->cache_age);
        EXPECT_EQ(got->layer_ms, want->layer_ms);
        EXPECT_EQ(got->new_token_text, want->new_token_text);
        for (size_t i = 0; i < want->confidence.size(); ++i)
            EXPECT_TRUE(got->confidence[i] == want->confidence[i] ||
                        (std::isnan(got->confidence[i]) && std::isnan(want->confidence[i])));
        ASSERT_EQ(got->triggers.size(), 1u);
        EXPECT_EQ(got->triggers[0].kind, "drift");
        EXPECT_DOUBLE_EQ(got->triggers[0].value, 0.8);
        EXPECT_EQ(got->has_oracle, want->has_oracle);
        if (want->has_oracle) {
            EXPECT_EQ(got->oracle.k_cos, want->oracle.k_cos);
            EXPECT_DOUBLE_EQ(got->oracle.logits_kl, 0.125);
            EXPECT_TRUE(got->oracle.commit_differs);
        }
        ASSERT_EQ(got->attention.size(), 1u);
        EXPECT_EQ(got->attention[0].row_index, want->attention[0].row_index);
        expect_quantised(got->attention[0], want->attention[0], 4);
    }
    auto meta = r->step_scalars(runs[0].run_id);
    ASSERT_EQ(meta.size(), 6u);
    EXPECT_DOUBLE_EQ(meta[3]["wall_ms"].get<double>(), 4.5);
    for (const auto& problem : r->check()) ADD_FAILURE() << problem;
}

// A closed session is a plain file: opening it read-only (a bundled lesson, a file someone sent)
// writes nothing beside it (it left -wal and -shm files in assets/lessons), and a compacted copy
// is one too.
TEST(Sessions, ReadingAClosedSessionWritesNothingBesideIt) {
    const auto dir = test::temp_dir("s-plain");
    const auto path = (dir / "a.clsession").string();
    write_session(path, 1, 4);
    const auto beside = [&] {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(dir))
            names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    };
    EXPECT_EQ(beside(), std::vector<std::string>{"a.clsession"});
    {
        auto r = SessionReader::open(path, false);
        EXPECT_EQ(r->runs().size(), 1u);
        EXPECT_EQ(r->step_scalars(r->runs()[0].run_id).size(), 4u);
        EXPECT_EQ(beside(), std::vector<std::string>{"a.clsession"}) << "while open";
        r->copy_to((dir / "b.clsession").string());
    }
    EXPECT_EQ(beside(), (std::vector<std::string>{"a.clsession", "b.clsession"}));
    auto copy = SessionReader::open((dir / "b.clsession").string(), false);
    EXPECT_EQ(copy->runs().size(), 1u);
    EXPECT_EQ(beside(), (std::vector<std::string>{"a.clsession", "b.clsession"}));
}

TEST(Sessions, AttentionPrecisionIsAWriterOption) {
    // An odd number of columns (the last nibble of each 4-bit row is padding) and varied values.
    const auto dir = test::temp_dir("s");
    const int L = 13;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    std::vector<std::shared_ptr<trace::StepRecord>> steps;
    for (int s = 0; s < 4; ++s) {
        auto r = make_step(0, s, L, 3, false);
        r->attention[0].rows = 3;
        r->attention[0].row_index = {0, 6, 12};
        std::vector<float> probs;
        for (int k = 0; k < 3 * L; ++k) probs.push_back(u(rng) * u(rng));
        r->attention[0].set_probs(probs.data());
        steps.push_back(r);
    }
    for (int bits : {8, 4}) {
        const auto path = (dir / ("u" + std::to_string(bits) + ".clsession")).string();
        WriterOptions o;
        o.attention_bits = bits;
        {
            auto w = SessionWriter::open(path, o);
            w->on_run_start(make_info(0, "none", L));
            for (const auto& r : steps) w->publish(r);
            ASSERT_TRUE(w->flush()) << w->error();
        }
        auto r = SessionReader::open(path);
        for (int s = 0; s < 4; ++s) {
            auto got = r->load_step(r->runs()[0].run_id, s);
            ASSERT_EQ(got->attention.size(), 1u);
            EXPECT_EQ(got->attention[0].row_index, steps[s]->attention[0].row_index);
            expect_quantised(got->attention[0], steps[s]->attention[0], bits);
        }
    }
    WriterOptions bad;
    bad.attention_bits = 5;
    EXPECT_THROW(SessionWriter::open((dir / "bad.clsession").string(), bad), SessionError);
    EXPECT_FALSE(std::filesystem::exists(dir / "bad.clsession"));
}

// A map at a level of detail (pooled into tiles) keeps its tiles, keys and cells through a session
// and through its JSON form; a v7 file's maps read as full resolution.
TEST(Sessions, APooledAttentionMapRoundTripsWithItsTiles) {
    const int L = 23;
    auto r = make_step(0, 0, L, 3, false);
    trace::AttentionMap& a = r->attention[0];
    a.keys = L;
    a.key_tile = 4;
    a.row_tile = 4;
    const std::vector<int32_t> positions{4, 5, 9, 17};
    std::vector<float> probs;
    for (int k = 0; k < 4 * L; ++k) probs.push_back(static_cast<float>(k % 7 + 1) / 100.f);
    a.set_pooled_head_mean(probs.data(), 1, positions);
    ASSERT_EQ(a.rows, 3);  // tiles starting at 4, 8 and 16
    ASSERT_EQ(a.cols, 6);
    const auto dir = test::temp_dir("s");
    for (int version : {0, 7}) {
        const auto path = (dir / ("pooled" + std::to_string(version) + ".clsession")).string();
        WriterOptions o;
        o.attention_bits = 8;
        o.schema_version = version;
        auto info = make_info(0, "none", L);
        info.attention_tile = 4;
        {
            auto w = SessionWriter::open(path, o);
            w->on_run_start(info);
            if (version == 0) {
                w->publish(r);
            } else {  // a v7 file holds full-resolution maps only
                auto full = make_step(0, 0, L, 3, false);
                w->publish(full);
            }
            ASSERT_TRUE(w->flush()) << w->error();
        }
        auto reader = SessionReader::open(path, /*repair=*/false);
        auto got = reader->load_step(reader->runs()[0].run_id, 0);
        ASSERT_EQ(got->attention.size(), 1u);
        const auto& m = got->attention[0];
        if (version == 7) {
            EXPECT_TRUE(m.full_resolution());
            EXPECT_EQ(m.key_count(), L);
            EXPECT_EQ(reader->runs()[0].info.attention_tile, 1);
            continue;
        }
        EXPECT_EQ(reader->runs()[0].info.attention_tile, 4);
        EXPECT_EQ(m.key_tile, 4);
        EXPECT_EQ(m.row_tile, 4);
        EXPECT_EQ(m.keys, L);
        EXPECT_EQ(m.row_index, a.row_index);
        expect_quantised(m, a, 8);
        EXPECT_EQ(m.describe(), "4x4 tiles");
    }
    trace::StepRecord back;
    from_json(to_json(*r, true), back);
    ASSERT_EQ(back.attention.size(), 1u);
    EXPECT_EQ(back.attention[0].key_tile, 4);
    EXPECT_EQ(back.attention[0].levels, a.levels);
    auto j = to_json(*r, true);
    j["attention"][0]["cols"] = 5;  // does not match 23 keys in tiles of 4
    EXPECT_THROW(from_json(j, back), SessionError);
}

TEST(Sessions, ReplayStoreMatchesTheLiveStore) {
    const auto path = (test::temp_dir("s") / "a.clsession").string();
    trace::TraceStore live;
    {
        auto w = SessionWriter::open(path);
        trace::FanOutSink fan;
        fan.add(&live);
        fan.add(w.get());
        fan.on_run_start(make_info(5, "none"));
        for (int s = 0; s < 4; ++s) fan.publish(make_step(5, s));
        fan.on_run_end(5, complete_summary());
        ASSERT_TRUE(w->flush());
    }
    trace::TraceStore replay(false);
    SessionReader::open(path)->load_into(replay);
    ASSERT_EQ(replay.run_ids().size(), 1u);
    const int32_t id = replay.run_ids()[0];
    ASSERT_EQ(replay.step_count(id), live.step_count(5));
    for (int s = 0; s < 4; ++s) {
        EXPECT_EQ(replay.step(id, s)->tokens, live.step(5, s)->tokens);
        EXPECT_EQ(replay.step(id, s)->actions, live.step(5, s)->actions);
    }
    EXPECT_FALSE(replay.is_live());
}

TEST(Sessions, MigratesAV1FixtureWrittenByTheV1Writer) {
    const auto path = (test::temp_dir("s") / "v1.clsession").string();
    WriterOptions v1;
    v1.schema_version = 1;
    write_session(path, 1, 3, v1);
    {
        Db db(path, SQLITE_OPEN_READONLY);
        EXPECT_EQ(db.pragma_int("user_version"), 1);
    }
    auto r = SessionReader::open(path);
    EXPECT_EQ(r->info().schema_version_found, 1);
    EXPECT_EQ(r->info().schema_version, kCurrentSchema);
    EXPECT_EQ(r->runs().at(0).note, "");                      // the v2 column exists now
    EXPECT_EQ(r->runs().at(0).info.noise_process, "masked");  // and the v3 one
    r->set_note(r->runs().at(0).run_id, "kept");
    EXPECT_EQ(r->runs().at(0).note, "kept");
    EXPECT_EQ(r->load_step(r->runs().at(0).run_id, 2)->tokens, make_step(0, 2)->tokens);
    // Appending to an old file migrates it too.
    auto reopened = SessionReader::open(path);
    EXPECT_EQ(reopened->info().schema_version_found, kCurrentSchema);
}

TEST(Sessions, RefusesNewerForeignAndBrokenFiles) {
    const auto dir = test::temp_dir("s");
    const auto newer = (dir / "newer.clsession").string();
    write_session(newer, 1, 1);
    {
        Db db(newer, SQLITE_OPEN_READWRITE);
        db.exec("PRAGMA user_version = 99");
    }
    EXPECT_NE(open_error(newer).find("newer CacheLens"), std::string::npos) << open_error(newer);

    const auto other = (dir / "other.db").string();
    {
        Db db(other, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        db.exec("CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    }
    EXPECT_NE(open_error(other).find("another SQLite database"), std::string::npos)
        << open_error(other);

    const auto noise = (dir / "noise.clsession").string();
    std::string bytes(8192, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 7);
    test::write_file(noise, bytes);
    EXPECT_NE(open_error(noise).find("not a CacheLens session"), std::string::npos)
        << open_error(noise);

    const auto good = (dir / "good.clsession").string();
    write_session(good, 1, 20);
    {
        Db db(good, SQLITE_OPEN_READWRITE);
        db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    }
    const auto truncated = (dir / "truncated.clsession").string();
    auto content = test::read_file(good);
    test::write_file(truncated, content.substr(0, content.size() / 3));
    std::string err = open_error(truncated);
    if (err.empty()) {  // the header survived: the damage must show up when reading
        auto r = SessionReader::open(truncated);
        EXPECT_FALSE(r->check().empty());
    }
    test::write_file(dir / "tiny.clsession", "SQLite");
    EXPECT_NE(open_error((dir / "tiny.clsession").string()).find("truncated"), std::string::npos);
    EXPECT_NE(open_error((dir / "missing.clsession").string()).find("not found"),
              std::string::npos);
    // The refused files are untouched.
    EXPECT_EQ(test::read_file(noise), bytes);
}

TEST(Sessions, CorruptBlobGivesAClearErrorNotACrash) {
    const auto path = (test::temp_dir("s") / "a.clsession").string();
    write_session(path, 1, 3);
    {
        Db db(path, SQLITE_OPEN_READWRITE);
        db.exec(
            "UPDATE array SET data = x'28b52ffd0000deadbeef' WHERE name = 'tokens' AND step = 1");
        db.exec("UPDATE array SET shape = '5' WHERE name = 'actions' AND step = 2");
    }
    auto r = SessionReader::open(path);
    const auto run = r->runs().at(0).run_id;
    EXPECT_NO_THROW(r->load_step(run, 0));
    try {
        r->load_step(run, 1);
        FAIL();
    } catch (const SessionError& e) {
        EXPECT_NE(std::string(e.what()).find("step 1"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("tokens"), std::string::npos) << e.what();
    }
    EXPECT_THROW(r->load_step(run, 2), SessionError);
    EXPECT_EQ(r->check().size(), 2u);
}

// A corrupt JSON cell names the file, the run and the field, and where the JSON broke, not the
// parser's internals.
TEST(Sessions, CorruptJsonCellIsNamedInUsersTerms) {
    const auto path = (test::temp_dir("s") / "j.clsession").string();
    write_session(path, 1, 2);
    {
        Db db(path, SQLITE_OPEN_READWRITE);
        db.exec("UPDATE run SET summary_json = '{\"steps\": 2, oops'");
    }
    try {
        SessionReader::open(path)->runs();
        FAIL();
    } catch (const SessionError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(path + ": run 1: summary: corrupt (not valid JSON at byte"),
                  std::string::npos)
            << m;
        EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
        EXPECT_EQ(m.find(path, m.find(path) + 1), std::string::npos) << "the path twice: " << m;
    }
}

TEST(Sessions, KilledRecorderLeavesCommittedStepsAndAnAbortedRun) {
    const auto path = (test::temp_dir("s") / "killed.clsession").string();
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        WriterOptions o;
        o.batch_steps = 1;
        o.batch_ms = 5;
        auto w = SessionWriter::open(path, o);
        w->on_run_start(make_info(0, "none"));
        for (int s = 0;; ++s) {
            w->publish(make_step(0, s));
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }
    // Wait until some steps are committed, then kill without warning.
    int64_t committed = 0;
    for (int i = 0; i < 500 && committed < 20; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        try {
            auto r = SessionReader::open(path, /*repair=*/false);
            auto runs = r->runs();
            if (!runs.empty()) committed = runs[0].step_count;
        } catch (const SessionError&) {
        }
    }
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_GE(committed, 20);
    auto r = SessionReader::open(path);
    EXPECT_EQ(r->info().aborted_on_open, 1);
    auto runs = r->runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, trace::RunStatus::Aborted);
    EXPECT_GE(runs[0].step_count, committed);
    for (int s = 0; s < runs[0].step_count; ++s)
        EXPECT_EQ(r->load_step(runs[0].run_id, s)->tokens, make_step(0, s)->tokens);
    EXPECT_TRUE(r->check().empty());
}

// The recording process of the app, killed at 100 random moments (while the file is created,
// mid-run, between runs, at a comparison): every session left behind opens, holds every step the
// writer had reported committed before the kill, intact, and its unfinished run is marked
// aborted. Label `long` (about 20 s): CACHELENS_KILLS=N changes the count.
TEST(SessionsLong, RandomKillsLoseNoCommittedStep) {
    const char* env = std::getenv("CACHELENS_KILLS");
    const int kills = env ? std::max(1, std::atoi(env)) : 100;
    std::mt19937 rng(20261124);
    int opened = 0, with_steps = 0;
    for (int k = 0; k < kills; ++k) {
        std::string name = std::to_string(k);  // not "k" + ...: GCC 12 warns (-Wrestrict)
        name += ".clsession";
        const auto path = (test::temp_dir("kill") / name).string();
        int fds[2];
        ASSERT_EQ(pipe(fds), 0);
        const pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            close(fds[0]);
            WriterOptions o;
            o.batch_steps = 3;
            o.batch_ms = 3;
            auto w = SessionWriter::open(path, o);
            for (int32_t run = 0;; ++run) {
                w->begin_comparison({run});
                w->on_run_start(make_info(run, "policy" + std::to_string(run)));
                for (int32_t s = 0; s < 8; ++s) {
                    w->publish(make_step(run, s));
                    // Every other step: wait for the commit, then tell the parent it is safe.
                    if (s % 2 == 1 && w->flush()) {
                        const int32_t done[2] = {run, s + 1};
                        if (write(fds[1], done, sizeof done) != sizeof done) _exit(3);
                    }
                }
                w->on_run_end(run, complete_summary());
            }
        }
        close(fds[1]);
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::uniform_int_distribution<int>(0, 120000)(rng)));
        kill(child, SIGKILL);
        int status = 0;
        waitpid(child, &status, 0);
        std::map<int32_t, int32_t> reported;  // run -> steps committed before the kill
        int32_t done[2];
        while (read(fds[0], done, sizeof done) == sizeof done)
            reported[done[0]] = std::max(reported[done[0]], done[1]);
        close(fds[0]);
        if (!std::filesystem::exists(path)) {
            EXPECT_TRUE(reported.empty()) << "kill " << k;
            continue;
        }
        std::unique_ptr<SessionReader> r;
        try {
            r = SessionReader::open(path);
        } catch (const SessionError& e) {
            // Killed while the file was being created: nothing was reported committed, and the
            // error names the file.
            EXPECT_TRUE(reported.empty()) << "kill " << k << ": " << e.what();
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
            continue;
        }
        ++opened;
        const auto runs = r->runs();
        for (const auto& [run, steps] : reported) {
            // The session numbers runs itself, in the order they started.
            ASSERT_LT(static_cast<size_t>(run), runs.size())
                << "kill " << k << ": run " << run << " lost";
            const auto it = runs.begin() + run;
            EXPECT_GE(it->step_count, steps) << "kill " << k << ": run " << run;
            for (int32_t s = 0; s < it->step_count; ++s)
                EXPECT_EQ(r->load_step(it->run_id, s)->tokens, make_step(run, s)->tokens);
            with_steps += steps > 0;
        }
        // Every run but the last ended; the last one is complete or marked aborted.
        for (size_t i = 0; i + 1 < runs.size(); ++i)
            EXPECT_EQ(runs[i].status, trace::RunStatus::Complete) << "kill " << k;
        if (!runs.empty() && runs.back().status != trace::RunStatus::Complete) {
            EXPECT_EQ(runs.back().status, trace::RunStatus::Aborted) << "kill " << k;
        }
        EXPECT_TRUE(r->check().empty()) << "kill " << k;
    }
    std::printf("%d kills: %d sessions opened, %d with committed steps checked\n", kills, opened,
                with_steps);
    EXPECT_GT(with_steps, kills / 4) << "the kills landed mostly before anything was written";
}

// The queue to the writer thread is bounded: a producer faster than the writer waits instead of
// queueing without end (loop mode grew by megabytes a lap), and nothing is lost or reordered.
TEST(Sessions, ABoundedQueueWaitsForTheWriterAndLosesNothing) {
    const auto path = (test::temp_dir("s") / "bounded.clsession").string();
    WriterOptions o;
    o.max_queued = 4;
    o.batch_steps = 2;
    o.batch_ms = 1;
    {
        auto w = SessionWriter::open(path, o);
        for (int32_t run = 0; run < 3; ++run) {
            w->on_run_start(make_info(run, "policy" + std::to_string(run)));
            for (int32_t s = 0; s < 200; ++s) w->publish(make_step(run, s));
            w->on_run_end(run, complete_summary());
        }
        ASSERT_TRUE(w->flush());
    }
    auto r = SessionReader::open(path);
    const auto runs = r->runs();
    ASSERT_EQ(runs.size(), 3u);
    for (const auto& run : runs) {
        EXPECT_EQ(run.step_count, 200);
        EXPECT_EQ(run.status, trace::RunStatus::Complete);
        EXPECT_EQ(r->load_step(run.run_id, 199)->tokens, make_step(0, 199)->tokens);
    }
}

TEST(Sessions, FullDiskReportsAnErrorAndKeepsTheRunInMemory) {
    const auto path = (test::temp_dir("s") / "full.clsession").string();
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead of killing us
        struct rlimit lim {
            300 * 1024, 300 * 1024
        };
        setrlimit(RLIMIT_FSIZE, &lim);
        WriterOptions o;
        o.batch_steps = 4;
        auto w = SessionWriter::open(path, o);
        w->on_run_start(make_info(0, "none", 400, 6));
        for (int s = 0; s < 3; ++s) w->publish(make_step(0, s, 400, 6));
        if (!w->flush()) _exit(2);  // these fit: they must be committed
        for (int s = 3; s < 400; ++s) w->publish(make_step(0, s, 400, 6));
        const bool ok = w->flush();
        const bool kept = w->unwritten_steps() > 0;
        _exit(!ok && kept && w->error().find("kept in memory") != std::string::npos ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the writer reports the failure and keeps the records";
    auto r = SessionReader::open(path);  // what was committed before the disk filled is intact
    auto runs = r->runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_GT(runs[0].step_count, 0);
    EXPECT_LT(runs[0].step_count, 400);
    EXPECT_TRUE(r->check().empty());
}

// Runs `check` in a child process that cannot write to `dir` (mode 0555): root ignores
// permissions, so as root the child drops to nobody and `dir` is handed to nobody first. The
// child's exit status is returned; 77 means it could not drop its privileges.
int run_without_write_access(const std::filesystem::path& dir, const std::function<int()>& check) {
    const uid_t nobody = 65534;
    if (geteuid() == 0) {
        for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
            EXPECT_EQ(chown(e.path().c_str(), nobody, nobody), 0);
        EXPECT_EQ(chown(dir.c_str(), nobody, nobody), 0);
    }
    EXPECT_EQ(chmod(dir.c_str(), 0555), 0);
    const pid_t child = fork();
    if (child == 0) {
        if (geteuid() == 0 && (setgid(nobody) != 0 || setuid(nobody) != 0)) _exit(77);
        _exit(check());
    }
    int status = 0;
    waitpid(child, &status, 0);
    chmod(dir.c_str(), 0755);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A read-only session folder (a shared drive, a lesson folder installed by an administrator):
// a new recording there and more runs appended to a session there fail with an error naming the
// file; the sessions already there still open and are byte for byte what they were.
TEST(Sessions, AReadOnlyFolderFailsWithTheFileNameAndDamagesNothing) {
    const auto dir = test::temp_dir("s-ro");
    const auto kept = (dir / "kept.clsession").string();
    const auto fresh = (dir / "new.clsession").string();
    write_session(kept, 2, 3);
    const std::string before = test::read_file(kept);
    const int status = run_without_write_access(dir, [&] {
        auto fails_naming = [](const std::string& path, const std::function<void()>& write) {
            try {
                write();
            } catch (const SessionError& e) {
                std::fprintf(stderr, "refused: %s\n", e.what());
                const std::string what = e.what();
                return what.find(path) != std::string::npos &&
                       what.find("is not writable") != std::string::npos;
            }
            return false;
        };
        if (!fails_naming(fresh, [&] { SessionWriter::open(fresh); })) return 1;
        const bool append_failed = fails_naming(kept, [&] {
            auto w = SessionWriter::open(kept);
            w->on_run_start(make_info(0, "third"));
            w->publish(make_step(0, 0));
            if (!w->flush()) throw SessionError(w->error());
        });
        if (!append_failed) return 2;
        auto r = SessionReader::open(kept, false);  // reading needs no write access
        return r->runs().size() == 2 && r->check().empty() ? 0 : 3;
    });
    if (status == 77) GTEST_SKIP() << "cannot drop root privileges to test a read-only folder";
    EXPECT_EQ(status, 0) << "1: a new session was created or its error does not name the file "
                            "and its unwritable folder; 2: the same for appending; "
                            "3: the existing session no longer reads back";
    EXPECT_EQ(test::read_file(kept), before) << "the existing session was changed";
    EXPECT_FALSE(std::filesystem::exists(fresh));
}

TEST(Sessions, UnwritableLocationFailsWithTheFileName) {
    const auto path = (test::temp_dir("s") / "no-such-dir" / "x.clsession").string();
    try {
        SessionWriter::open(path);
        FAIL();
    } catch (const SessionError& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    }
}

TEST(Sessions, AppendsComparisonsAndDeletesRuns) {
    const auto path = (test::temp_dir("s") / "a.clsession").string();
    write_session(path, 2, 2);
    auto w = SessionWriter::open(path);
    w->on_run_start(make_info(0, "third"));
    w->on_run_end(0, complete_summary());
    ASSERT_TRUE(w->flush());
    w.reset();
    auto r = SessionReader::open(path);
    auto runs = r->runs();
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[2].comparison_id, 1);
    const auto comparisons = r->comparisons();
    ASSERT_EQ(comparisons.size(), 2u);  // one per writer, its runs in the order they started
    EXPECT_EQ(comparisons[0].run_ids, (std::vector<int64_t>{runs[0].run_id, runs[1].run_id}));
    EXPECT_EQ(comparisons[1].run_ids, std::vector<int64_t>{runs[2].run_id});
    r->delete_run(runs[0].run_id);
    r->rename("workshop");
    r->vacuum();
    auto again = SessionReader::open(path);
    EXPECT_EQ(again->runs().size(), 2u);
    EXPECT_EQ(again->info().name, "workshop");
}

trace::AccuracySweep make_sweep() {
    trace::AccuracySweep s;
    s.policy = "none";
    s.gen_len = 64;
    s.block_len = 32;
    s.task_seed = 3;
    for (const char* model : {"masked-model", "uniform-model"})
        for (int32_t t : {8, 64}) {
            trace::AccuracyPoint p;
            p.model = model;
            p.noise_process = std::string(model).substr(0, std::string(model).find('-'));
            p.task = "arith";
            p.steps = t;
            p.items = 20;
            p.correct = t == 8 ? 7 : 19;
            p.low = 0.1 * p.correct / 20;
            p.high = 1.0;
            p.tokens_per_s = 12.5 * t;
            s.points.push_back(p);
        }
    return s;
}

// A run written with steps, ended complete.
void write_run(SessionWriter& w, int32_t run, const std::string& policy, int steps = 2) {
    w.on_run_start(make_info(run, policy));
    for (int s = 0; s < steps; ++s) w.publish(make_step(run, s));
    w.on_run_end(run, complete_summary());
}

std::vector<std::string> policies_of(SessionReader& r, const ComparisonRecord& c) {
    std::vector<std::string> out;
    const auto runs = r.runs();
    for (int64_t id : c.run_ids)
        for (const auto& run : runs)
            if (run.run_id == id) out.push_back(run.info.policy);
    return out;
}

// The app's recording: each Play is a comparison; a slider move re-runs one column and the next
// comparison carries the others over (the same rows, not copies); each loop lap replaces the lap
// before it and deletes the runs only that lap held (the 73-column replay of issue #19).
TEST(Sessions, EveryPlayAndReRunIsItsOwnComparison) {
    const auto path = (test::temp_dir("s") / "c.clsession").string();
    auto w = SessionWriter::open(path);
    w->begin_comparison({0, 1});  // Play: columns none, dkv
    write_run(*w, 0, "none");
    write_run(*w, 1, "dkv");
    w->begin_comparison({0, 7});  // a slider move, moved again before its run made a step...
    write_run(*w, 7, "dkv-superseded", /*steps=*/0);
    w->begin_comparison({0, 2});  // ...re-runs column 1
    write_run(*w, 2, "dkv-moved");
    w->begin_comparison({3, 4}, /*lap=*/true);  // loop lap 1: the re-run stays...
    write_run(*w, 3, "none");
    write_run(*w, 4, "dkv-lap1");
    w->begin_comparison({5, 6}, /*lap=*/true);  // ...lap 2 replaces lap 1
    write_run(*w, 5, "none");
    write_run(*w, 6, "dkv-lap2");
    ASSERT_TRUE(w->flush()) << w->error();
    w.reset();
    auto r = SessionReader::open(path);
    const auto c = r->comparisons();
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(policies_of(*r, c[0]), (std::vector<std::string>{"none", "dkv"}));
    EXPECT_EQ(policies_of(*r, c[1]), (std::vector<std::string>{"none", "dkv-moved"}));
    EXPECT_EQ(c[1].run_ids[0], c[0].run_ids[0]);  // carried over, not copied
    EXPECT_EQ(policies_of(*r, c[2]), (std::vector<std::string>{"none", "dkv-lap2"}));
    EXPECT_EQ(r->runs().size(), 5u);  // lap 1's two runs and the superseded one are gone
    EXPECT_TRUE(r->check().empty());
    Db db(path, SQLITE_OPEN_READONLY);
    Stmt orphans(db,
                 "SELECT (SELECT count(*) FROM step WHERE run_id NOT IN (SELECT run_id FROM run))"
                 " + (SELECT count(*) FROM array WHERE run_id NOT IN (SELECT run_id FROM run))");
    ASSERT_TRUE(orphans.step());
    EXPECT_EQ(orphans.col_int(0), 0) << "rows of deleted runs are left behind";
}

TEST(Sessions, EveryLapIsKeptWhenAskedFor) {
    const auto path = (test::temp_dir("s") / "laps.clsession").string();
    {
        auto w = SessionWriter::open(path);
        for (int32_t lap = 0; lap < 3; ++lap) {
            w->begin_comparison({lap}, /*lap=*/true, /*keep_every_lap=*/true);
            write_run(*w, lap, "lap" + std::to_string(lap));
        }
        ASSERT_TRUE(w->flush());
    }
    EXPECT_EQ(SessionReader::open(path)->comparisons().size(), 3u);
}

TEST(Sessions, DeletingAComparisonKeepsRunsAnotherOneHolds) {
    const auto path = (test::temp_dir("s") / "d.clsession").string();
    {
        auto w = SessionWriter::open(path);
        w->begin_comparison({0, 1});
        write_run(*w, 0, "none");
        write_run(*w, 1, "dkv");
        w->begin_comparison({0, 2});
        write_run(*w, 2, "elastic");
        ASSERT_TRUE(w->flush());
    }
    auto r = SessionReader::open(path);
    const auto bytes = r->run_bytes();
    EXPECT_EQ(bytes.size(), 3u);
    for (const auto& [run, b] : bytes) EXPECT_GT(b, 0) << run;
    r->delete_comparison(r->comparisons().back().comparison_id);
    ASSERT_EQ(r->comparisons().size(), 1u);
    EXPECT_EQ(policies_of(*r, r->comparisons()[0]), (std::vector<std::string>{"none", "dkv"}));
    EXPECT_EQ(r->runs().size(), 2u);  // elastic went; none stayed for the first comparison
}

TEST(Sessions, AV4FileGetsOneComparisonPerRecorder) {
    const auto dir = test::temp_dir("s");
    const auto path = (dir / "v4.clsession").string();
    WriterOptions v4;
    v4.schema_version = 4;
    write_session(path, 2, 1, v4);
    {
        auto w = SessionWriter::open(path, v4);  // appends: migrates to the current version first
        write_run(*w, 0, "later");
        ASSERT_TRUE(w->flush());
    }
    const auto old = (dir / "v4-old.clsession").string();
    write_session(old, 3, 1, v4);
    auto r = SessionReader::open(old, /*repair=*/false);  // migrated in memory; the file stays v4
    EXPECT_EQ(r->info().schema_version_found, 4);
    ASSERT_EQ(r->comparisons().size(), 1u);
    EXPECT_EQ(policies_of(*r, r->comparisons()[0]),
              (std::vector<std::string>{"policy0", "policy1", "policy2"}));
    auto appended = SessionReader::open(path);
    ASSERT_EQ(appended->comparisons().size(), 2u);
    EXPECT_EQ(policies_of(*appended, appended->comparisons()[1]),
              std::vector<std::string>{"later"});
}

TEST(Sessions, RunsFromBeforeArchitecturesWereRecordedReadAsLlada) {
    const auto path = (test::temp_dir("s") / "v5.clsession").string();
    WriterOptions v5;
    v5.schema_version = 5;
    write_session(path, 2, 1, v5);
    auto r = SessionReader::open(path, /*repair=*/false);
    EXPECT_EQ(r->info().schema_version_found, 5);
    ASSERT_EQ(r->runs().size(), 2u);
    for (const auto& run : r->runs()) EXPECT_EQ(run.info.architecture, "llada");
}

TEST(Sessions, StoresAccuracySweepsBesideTheRuns) {
    const auto path = (test::temp_dir("s") / "sweep.clsession").string();
    write_session(path, 1, 2);
    const auto sweep = make_sweep();
    {
        auto w = SessionWriter::open(path);
        w->add_report(sweep);
        ASSERT_TRUE(w->flush()) << w->error();
    }
    auto r = SessionReader::open(path, /*repair=*/false);
    const auto read = r->accuracy_sweeps();
    ASSERT_EQ(read.size(), 1u);
    EXPECT_EQ(to_json(read[0]), to_json(sweep));  // every field survives, in one JSON form
    EXPECT_EQ(read[0].series().size(), 2u);
    EXPECT_DOUBLE_EQ(read[0].points[1].accuracy(), 19.0 / 20);
    EXPECT_EQ(r->runs().size(), 1u);  // the runs are untouched
    EXPECT_TRUE(r->check().empty());
}

TEST(Sessions, OldFilesHaveNoSweepsAndMalformedOnesNameTheReport) {
    const auto dir = test::temp_dir("s");
    const auto old = (dir / "v1.clsession").string();
    WriterOptions v1;
    v1.schema_version = 1;
    write_session(old, 1, 1, v1);
    EXPECT_TRUE(SessionReader::open(old)->accuracy_sweeps().empty());  // migrated: table exists
    {
        Db db(old, SQLITE_OPEN_READWRITE);
        insert_report(db, kAccuracySweepKind, R"({"policy": "none", "gen_length": 64})");
        insert_report(db, "some-future-kind", "{}");  // other kinds are not sweeps
    }
    auto r = SessionReader::open(old);
    try {
        r->accuracy_sweeps();
        FAIL() << "a sweep without block_length and points was accepted";
    } catch (const SessionError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(old), std::string::npos) << what;
        EXPECT_NE(what.find("report 1"), std::string::npos) << what;
    }
    EXPECT_EQ(r->check().size(), 1u);
    {
        Db db(old, SQLITE_OPEN_READWRITE);
        db.exec("UPDATE report SET body = 'not json' WHERE id = 1");
    }
    EXPECT_THROW(SessionReader::open(old)->accuracy_sweeps(), SessionError);
}

}  // namespace
}  // namespace cl::sessions

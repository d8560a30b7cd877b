#include "sessions/schema.h"

#include <functional>
#include <vector>

namespace cl::sessions {
namespace {

const char* kSchemaV1 = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE run (
    run_id INTEGER PRIMARY KEY,
    comparison_id INTEGER NOT NULL DEFAULT 0,
    policy TEXT NOT NULL, params_json TEXT NOT NULL, sampler_json TEXT NOT NULL,
    model_name TEXT, model_hash TEXT, device TEXT, threads INTEGER, seed INTEGER,
    prompt TEXT, prompt_len INTEGER, gen_len INTEGER, block_len INTEGER, steps_planned INTEGER,
    n_layers INTEGER, n_heads INTEGER, mask_id INTEGER, eos_id INTEGER, app_version TEXT,
    token_text_json TEXT NOT NULL DEFAULT '{}',
    status TEXT NOT NULL DEFAULT 'running', started_utc TEXT, ended_utc TEXT, summary_json TEXT);
CREATE TABLE step (
    run_id INTEGER NOT NULL, step INTEGER NOT NULL, block INTEGER, step_in_block INTEGER,
    seq_len INTEGER, n_layers INTEGER, wall_ms REAL, flops REAL, flops_full REAL,
    recompute_fraction REAL, n_committed INTEGER, triggers_json TEXT, token_text_json TEXT,
    has_oracle INTEGER NOT NULL DEFAULT 0, oracle_logits_kl REAL, oracle_commit_differs INTEGER,
    PRIMARY KEY (run_id, step)) WITHOUT ROWID;
CREATE TABLE array (
    run_id INTEGER NOT NULL, step INTEGER NOT NULL, name TEXT NOT NULL,
    dtype TEXT NOT NULL, shape TEXT NOT NULL, encoding TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (run_id, step, name)) WITHOUT ROWID;
CREATE TABLE attention (
    run_id INTEGER NOT NULL, step INTEGER NOT NULL, layer INTEGER NOT NULL, head INTEGER NOT NULL,
    rows INTEGER NOT NULL, cols INTEGER NOT NULL, row_index BLOB NOT NULL, row_scale BLOB,
    quant TEXT NOT NULL, encoding TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (run_id, step, layer, head)) WITHOUT ROWID;
)sql";

// v1 -> v2: runs carry a user note; the session has a display name.
void migrate_v1_to_v2(Db& db) {
    db.exec("ALTER TABLE run ADD COLUMN note TEXT NOT NULL DEFAULT ''");
    db.exec("INSERT OR IGNORE INTO meta(key, value) VALUES ('name', '')");
}

// v2 -> v3: runs name the noise process of their model (all earlier runs were masked); steps say
// whether the drift probe measured them.
void migrate_v2_to_v3(Db& db) {
    db.exec("ALTER TABLE run ADD COLUMN noise_process TEXT NOT NULL DEFAULT 'masked'");
    db.exec("ALTER TABLE step ADD COLUMN has_drift INTEGER NOT NULL DEFAULT 0");
}

// v3 -> v4: reports, results over many runs kept beside them (sessions/reports.h).
void migrate_v3_to_v4(Db& db) {
    db.exec(
        "CREATE TABLE report (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, body TEXT NOT NULL, "
        "created_utc TEXT NOT NULL)");
}

// v4 -> v5: comparisons as their own rows, with their runs by column. A run belongs to the
// comparison it was made in and to every later one that kept it (a slider move re-runs one
// column; the others carry over). Older files had one comparison per recorder: their runs keep
// the id they have, in the order they were made.
void migrate_v4_to_v5(Db& db) {
    db.exec(
        "CREATE TABLE comparison (comparison_id INTEGER PRIMARY KEY, created_utc TEXT NOT NULL, "
        "label TEXT NOT NULL DEFAULT '')");
    // The key's columns first: SQLite 3.40's integrity_check reports a NOT NULL column placed
    // between a WITHOUT ROWID table's key columns as NULL.
    db.exec(
        "CREATE TABLE comparison_run (comparison_id INTEGER NOT NULL, column_index INTEGER NOT "
        "NULL, run_id INTEGER NOT NULL, PRIMARY KEY (comparison_id, column_index)) WITHOUT ROWID");
    db.exec("CREATE INDEX comparison_run_by_run ON comparison_run(run_id)");
    db.exec(
        "INSERT INTO comparison(comparison_id, created_utc) SELECT comparison_id, "
        "coalesce(min(started_utc), '') FROM run GROUP BY comparison_id");
    db.exec(
        "INSERT INTO comparison_run(comparison_id, run_id, column_index) SELECT comparison_id, "
        "run_id, row_number() OVER (PARTITION BY comparison_id ORDER BY run_id) - 1 FROM run");
}

// v5 -> v6: runs name their model's architecture (all earlier runs were LLaDA's).
void migrate_v5_to_v6(Db& db) {
    db.exec("ALTER TABLE run ADD COLUMN architecture TEXT NOT NULL DEFAULT 'llada'");
}

// v6 -> v7: runs name the type their model computed in (all earlier runs were fp32).
void migrate_v6_to_v7(Db& db) {
    db.exec("ALTER TABLE run ADD COLUMN dtype TEXT NOT NULL DEFAULT 'fp32'");
}

// v7 -> v8: attention at a level of detail. A run names its attention tile; a map its key and row
// tiles and the keys it covers (all earlier maps were at full resolution: keys = cols).
void migrate_v7_to_v8(Db& db) {
    db.exec("ALTER TABLE run ADD COLUMN attention_tile INTEGER NOT NULL DEFAULT 1");
    db.exec("ALTER TABLE attention ADD COLUMN keys INTEGER NOT NULL DEFAULT 0");
    db.exec("ALTER TABLE attention ADD COLUMN key_tile INTEGER NOT NULL DEFAULT 1");
    db.exec("ALTER TABLE attention ADD COLUMN row_tile INTEGER NOT NULL DEFAULT 1");
}

// v8 -> v9: runs name the kernel set their steps ran at (all earlier runs ran the fast one).
void migrate_v8_to_v9(Db& db) {
    db.exec("ALTER TABLE run ADD COLUMN kernels TEXT NOT NULL DEFAULT 'fast'");
}

const std::vector<std::function<void(Db&)>>& migrations() {
    static const std::vector<std::function<void(Db&)>> m{
        migrate_v1_to_v2, migrate_v2_to_v3, migrate_v3_to_v4, migrate_v4_to_v5, migrate_v5_to_v6,
        migrate_v6_to_v7, migrate_v7_to_v8, migrate_v8_to_v9};  // index i: v(i+1) -> v(i+2)
    return m;
}

bool has_tables(Db& db) {
    Stmt s(db, "SELECT count(*) FROM sqlite_master WHERE type='table'");
    return s.step() && s.col_int(0) > 0;
}

}  // namespace

bool table_exists(Db& db, const std::string& table) {
    Stmt s(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name = ?");
    s.bind(1, table);
    return s.step() && s.col_int(0) > 0;
}

void delete_run_rows(Db& db, int64_t run_id) {
    const bool comparisons = table_exists(db, "comparison_run");
    for (const char* table : {"attention", "array", "step", "comparison_run", "run"}) {
        if (!comparisons && std::string(table) == "comparison_run") continue;
        Stmt s(db, std::string("DELETE FROM ") + table + " WHERE run_id = ?");
        s.bind(1, run_id).run();
    }
    if (comparisons)
        db.exec(
            "DELETE FROM comparison WHERE comparison_id NOT IN (SELECT comparison_id FROM "
            "comparison_run)");
}

void create_schema(Db& db, int version) {
    db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
    db.exec("BEGIN");
    db.exec(kSchemaV1);
    db.exec(
        "INSERT INTO meta(key, value) VALUES ('created_utc', "
        "strftime('%Y-%m-%dT%H:%M:%SZ','now'))");
    db.exec("INSERT INTO meta(key, value) VALUES ('app_version', '" CL_VERSION "')");
    for (int v = 1; v < version; ++v) migrations()[static_cast<size_t>(v - 1)](db);
    db.exec("PRAGMA user_version = " + std::to_string(version));
    db.exec("COMMIT");
}

int check_version(Db& db) {
    // Reading the header also detects files that are not SQLite at all.
    const int64_t app = db.pragma_int("application_id");
    const int64_t version = db.pragma_int("user_version");
    if (app != kApplicationId) {
        if (app == 0 && !has_tables(db))
            throw SessionError(db.path() + ": empty file, not a CacheLens session");
        throw SessionError(db.path() +
                           ": not a CacheLens session (another SQLite database, application_id " +
                           std::to_string(app) + ")");
    }
    if (version > kCurrentSchema)
        throw SessionError(db.path() + ": written by a newer CacheLens (session format v" +
                           std::to_string(version) + "; this version reads up to v" +
                           std::to_string(kCurrentSchema) + ")");
    if (version < kOldestSupportedSchema)
        throw SessionError(db.path() + ": session format v" + std::to_string(version) +
                           " is too old to read");
    return static_cast<int>(version);
}

int check_and_migrate(Db& db, bool allow_write) {
    const int version = check_version(db);
    if (version == kCurrentSchema) return version;
    if (!allow_write)
        throw SessionError(db.path() + ": session format v" + std::to_string(version) +
                           " needs a migration, but the file is read-only");
    db.exec("BEGIN IMMEDIATE");
    try {
        for (int v = version; v < kCurrentSchema; ++v) migrations()[static_cast<size_t>(v - 1)](db);
        db.exec("PRAGMA user_version = " + std::to_string(kCurrentSchema));
        db.exec("COMMIT");
    } catch (...) {
        sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
    return version;
}

void delete_comparison_rows(Db& db, int64_t comparison_id, const std::set<int64_t>& kept_runs) {
    std::vector<int64_t> orphans;
    {
        Stmt s(db,
               "SELECT run_id FROM comparison_run WHERE comparison_id = ?1 AND run_id NOT IN "
               "(SELECT run_id FROM comparison_run WHERE comparison_id != ?1)");
        s.bind(1, comparison_id);
        while (s.step())
            if (!kept_runs.count(s.col_int(0))) orphans.push_back(s.col_int(0));
    }
    for (int64_t run : orphans) delete_run_rows(db, run);
    Stmt m(db, "DELETE FROM comparison_run WHERE comparison_id = ?");
    m.bind(1, comparison_id).run();
    Stmt d(db, "DELETE FROM comparison WHERE comparison_id = ?");
    d.bind(1, comparison_id).run();
}

}  // namespace cl::sessions

#include "sweep/sweep_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/base/json_int.h"
#include "sessions/sqlite_util.h"

namespace cl::sweep {
namespace {

using sessions::Db;
using sessions::Stmt;

constexpr int64_t kApplicationId = 0x434C5357;  // "CLSW": a CacheLens sweep results file

const char* const kSchema = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE point (
  key TEXT PRIMARY KEY, idx INTEGER NOT NULL, model TEXT NOT NULL, device TEXT NOT NULL,
  policy TEXT NOT NULL, params TEXT NOT NULL, threads INTEGER NOT NULL, host TEXT NOT NULL,
  finished_utc TEXT NOT NULL);
CREATE TABLE item (
  point_key TEXT NOT NULL REFERENCES point(key) ON DELETE CASCADE, family TEXT NOT NULL,
  idx INTEGER NOT NULL, correct INTEGER NOT NULL, generated INTEGER NOT NULL,
  wall_ms REAL NOT NULL, flops REAL NOT NULL, flops_full REAL NOT NULL,
  prompt_len INTEGER NOT NULL, final_tokens TEXT NOT NULL,
  PRIMARY KEY (point_key, family, idx));
CREATE TABLE claim (idx INTEGER PRIMARY KEY, key TEXT NOT NULL, worker TEXT NOT NULL);
)sql";

// SQLite files start with this header; anything else is not ours, whatever its name.
bool looks_like_sqlite(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char magic[16] = {};
    in.read(magic, sizeof magic);
    return in.gcount() == sizeof magic && std::string(magic, 15) == "SQLite format 3";
}

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
    throw SweepFileError(path + ": " + why);
}

std::string meta_value(const Db& db, const std::string& key) {
    Stmt s(db, "SELECT value FROM meta WHERE key = ?");
    s.bind(1, key);
    if (!s.step()) refuse(db.path(), "not a complete sweep results file (no '" + key + "')");
    return s.col_text(0);
}

SweepFileInfo read_info(Db& db) {
    if (db.pragma_int("application_id") != kApplicationId)
        refuse(db.path(), "not a CacheLens sweep results file");
    SweepFileInfo info;
    try {
        info.format_version = std::stoi(meta_value(db, "format_version"));
        info.total_points = std::stoi(meta_value(db, "total_points"));
    } catch (const std::logic_error&) {
        refuse(db.path(), "the format version or point count is not a number");
    }
    if (info.format_version > kSweepFormatVersion)
        refuse(db.path(), "format v" + std::to_string(info.format_version) +
                              " is newer than this CacheLens reads (v" +
                              std::to_string(kSweepFormatVersion) + "); update CacheLens");
    info.spec_json = meta_value(db, "spec");
    info.created_utc = meta_value(db, "created_utc");
    return info;
}

void write_new_file(Db& db, const std::string& spec_json, int32_t total_points) {
    db.exec("BEGIN IMMEDIATE");
    db.exec(kSchema);
    db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
    Stmt m(db, "INSERT INTO meta (key, value) VALUES (?, ?)");
    const std::pair<std::string, std::string> rows[] = {
        {"format_version", std::to_string(kSweepFormatVersion)},
        {"spec", spec_json},
        {"created_utc", utc_now()},
        {"total_points", std::to_string(total_points)},
        {"application", "CacheLens " CL_VERSION}};
    for (const auto& [k, v] : rows) m.bind(1, k).bind(2, v).run();
    db.exec("COMMIT");
}

std::vector<ItemResult> load_items(const Db& db, const std::string& key) {
    Stmt s(db,
           "SELECT family, idx, correct, generated, wall_ms, flops, flops_full, prompt_len, "
           "final_tokens FROM item WHERE point_key = ? ORDER BY family, idx");
    s.bind(1, key);
    std::vector<ItemResult> items;
    while (s.step()) {
        ItemResult it;
        it.family = s.col_text(0);
        it.index = static_cast<int32_t>(s.col_int(1));
        it.correct = s.col_int(2) != 0;
        it.generated = static_cast<int32_t>(s.col_int(3));
        it.wall_ms = s.col_double(4);
        it.flops = s.col_double(5);
        it.flops_full = s.col_double(6);
        it.prompt_len = static_cast<int32_t>(s.col_int(7));
        try {
            it.final_tokens = json_ints<int32_t>(nlohmann::json::parse(s.col_text(8)));
        } catch (const std::exception&) {  // invalid JSON, or not whole numbers in range
            refuse(db.path(), "item " + it.family + " #" + std::to_string(it.index) +
                                  " of point '" + key + "' is corrupt (final tokens)");
        }
        items.push_back(std::move(it));
    }
    return items;
}

std::map<std::string, double> parse_params(const Db& db, const std::string& key,
                                           const std::string& text) {
    try {
        return nlohmann::json::parse(text).get<std::map<std::string, double>>();
    } catch (const nlohmann::json::exception&) {
        refuse(db.path(), "point '" + key + "' is corrupt (parameters)");
    }
}

void insert_items(Db& db, const PointResult& p) {
    Stmt s(db,
           "INSERT INTO item (point_key, family, idx, correct, generated, wall_ms, flops, "
           "flops_full, prompt_len, final_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (const auto& it : p.items) {
        s.bind(1, p.key).bind(2, it.family).bind(3, int64_t{it.index});
        s.bind(4, int64_t{it.correct}).bind(5, int64_t{it.generated}).bind(6, it.wall_ms);
        s.bind(7, it.flops).bind(8, it.flops_full).bind(9, int64_t{it.prompt_len});
        s.bind(10, nlohmann::json(it.final_tokens).dump()).run();
    }
}

}  // namespace

struct SweepStore::Impl {
    Db db;
    SweepFileInfo info;
    bool writable = false;
};

SweepStore::SweepStore() : m_impl(std::make_unique<Impl>()) {}

SweepStore::~SweepStore() {
    // The last writer to close leaves a plain file (no -wal/-shm beside it) that read-only
    // openers do not touch; while other workers still have it open this fails and changes nothing.
    if (m_impl && m_impl->writable && m_impl->db.get())
        sqlite3_exec(m_impl->db.get(), "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr);
}

std::unique_ptr<SweepStore> SweepStore::create_or_resume(const std::string& path,
                                                         const std::string& spec_json,
                                                         int32_t total_points) {
    const bool exists = std::filesystem::exists(path);
    if (exists && !looks_like_sqlite(path)) refuse(path, "not a CacheLens sweep results file");
    std::unique_ptr<SweepStore> s(new SweepStore());
    try {
        s->m_impl->db = Db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        Db& db = s->m_impl->db;
        sqlite3_busy_timeout(db.get(), 60000);  // workers share the file; points are seconds apart
        db.exec("PRAGMA journal_mode = WAL");
        db.exec("PRAGMA foreign_keys = ON");
        if (!exists) write_new_file(db, spec_json, total_points);
        s->m_impl->info = read_info(db);
        s->m_impl->writable = true;
    } catch (const sessions::SessionError& e) {
        throw SweepFileError(e.what());
    }
    if (s->m_impl->info.spec_json != spec_json)
        refuse(path, "holds the results of another spec; choose another --out or remove it");
    return s;
}

std::unique_ptr<SweepStore> SweepStore::open(const std::string& path) {
    if (!std::filesystem::exists(path)) refuse(path, "no such file");
    if (!looks_like_sqlite(path)) refuse(path, "not a CacheLens sweep results file");
    std::unique_ptr<SweepStore> s(new SweepStore());
    try {
        s->m_impl->db = Db(path, SQLITE_OPEN_READONLY);
        sqlite3_busy_timeout(s->m_impl->db.get(), 60000);
        s->m_impl->info = read_info(s->m_impl->db);
    } catch (const sessions::SessionError& e) {
        throw SweepFileError(e.what());
    }
    return s;
}

const SweepFileInfo& SweepStore::info() const {
    return m_impl->info;
}

const std::string& SweepStore::path() const {
    return m_impl->db.path();
}

std::set<std::string> SweepStore::finished_keys() const {
    std::set<std::string> keys;
    try {
        Stmt s(m_impl->db, "SELECT key FROM point");
        while (s.step()) keys.insert(s.col_text(0));
    } catch (const sessions::SessionError& e) {
        throw SweepFileError(e.what());
    }
    return keys;
}

std::vector<PointResult> SweepStore::points() const {
    const Db& db = m_impl->db;
    std::vector<PointResult> out;
    try {
        Stmt s(db,
               "SELECT key, idx, model, device, policy, params, threads, host, finished_utc "
               "FROM point ORDER BY idx");
        while (s.step()) {
            PointResult p;
            p.key = s.col_text(0);
            p.index = static_cast<int32_t>(s.col_int(1));
            p.model = s.col_text(2);
            p.device = s.col_text(3);
            p.policy = s.col_text(4);
            p.params = parse_params(db, p.key, s.col_text(5));
            p.threads = static_cast<int32_t>(s.col_int(6));
            p.host = s.col_text(7);
            p.finished_utc = s.col_text(8);
            out.push_back(std::move(p));
        }
        for (auto& p : out) p.items = load_items(db, p.key);
    } catch (const sessions::SessionError& e) {
        throw SweepFileError(e.what());
    }
    return out;
}

void SweepStore::add_point(const PointResult& p) {
    Db& db = m_impl->db;
    try {
        db.exec("BEGIN IMMEDIATE");
        Stmt del(db, "DELETE FROM point WHERE key = ?");
        del.bind(1, p.key).run();
        Stmt ins(db,
                 "INSERT INTO point (key, idx, model, device, policy, params, threads, host, "
                 "finished_utc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
        ins.bind(1, p.key).bind(2, int64_t{p.index}).bind(3, p.model).bind(4, p.device);
        ins.bind(5, p.policy).bind(6, nlohmann::json(p.params).dump());
        ins.bind(7, int64_t{p.threads}).bind(8, p.host).bind(9, p.finished_utc).run();
        insert_items(db, p);
        Stmt unclaim(db, "DELETE FROM claim WHERE idx = ?");
        unclaim.bind(1, int64_t{p.index}).run();
        db.exec("COMMIT");
    } catch (const sessions::SessionError& e) {
        sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        throw SweepFileError(e.what());
    }
}

std::optional<int32_t> SweepStore::claim_next(
    const std::vector<std::pair<int32_t, std::string>>& candidates, const std::string& worker) {
    Db& db = m_impl->db;
    try {
        db.exec("BEGIN IMMEDIATE");
        Stmt done(db, "SELECT 1 FROM point WHERE key = ?");
        Stmt taken(db, "SELECT 1 FROM claim WHERE idx = ?");
        for (const auto& [idx, key] : candidates) {
            done.bind(1, key);
            const bool finished = done.step();
            done.reset();
            taken.bind(1, int64_t{idx});
            const bool claimed = taken.step();
            taken.reset();
            if (finished || claimed) continue;
            Stmt claim(db, "INSERT INTO claim (idx, key, worker) VALUES (?, ?, ?)");
            claim.bind(1, int64_t{idx}).bind(2, key).bind(3, worker).run();
            db.exec("COMMIT");
            return idx;
        }
        db.exec("COMMIT");
    } catch (const sessions::SessionError& e) {
        sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        throw SweepFileError(e.what());
    }
    return std::nullopt;
}

void SweepStore::clear_claims() {
    try {
        m_impl->db.exec("DELETE FROM claim");
    } catch (const sessions::SessionError& e) {
        throw SweepFileError(e.what());
    }
}

void merge_sweep_files(const std::vector<std::string>& shards, const std::string& out) {
    if (shards.empty()) throw SweepFileError("merge: no shard files given");
    if (std::filesystem::exists(out)) refuse(out, "exists already; merge writes a new file");
    std::vector<std::unique_ptr<SweepStore>> opened;
    for (const auto& path : shards) {
        opened.push_back(SweepStore::open(path));
        if (opened.back()->info().spec_json != opened.front()->info().spec_json)
            refuse(path, "ran another spec than " + shards.front());
    }
    const auto& first = opened.front()->info();
    auto merged = SweepStore::create_or_resume(out, first.spec_json, first.total_points);
    std::set<std::string> seen;
    for (const auto& shard : opened)
        for (const auto& p : shard->points())
            if (seen.insert(p.key).second) merged->add_point(p);
}

}  // namespace cl::sweep

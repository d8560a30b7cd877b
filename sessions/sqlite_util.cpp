#include "sessions/sqlite_util.h"

#include <unistd.h>

#include <filesystem>

namespace cl::sessions {
namespace {

// SQLite says "unable to open database file" or "attempt to write a readonly database" whether the
// file or its folder (where the journal goes) is read-only; the user needs to know which.
std::string write_access_hint(const std::string& path) {
    const std::filesystem::path file(path);
    const auto folder = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
    if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), W_OK) != 0)
        return " (the file is read-only)";
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec))
        return " (the folder " + folder.string() + " does not exist)";
    if (access(folder.c_str(), W_OK) != 0)
        return " (the folder " + folder.string() + " is not writable)";
    return "";
}

}  // namespace

Db::Db(const std::string& path, int flags) : m_path(path) {
    const int rc = sqlite3_open_v2(path.c_str(), &m_db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
        const std::string msg = m_db ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
        sqlite3_close(m_db);
        m_db = nullptr;
        const bool writing = (flags & SQLITE_OPEN_READWRITE) != 0;
        throw SessionError(path + ": cannot open: " + msg +
                           (writing ? write_access_hint(path) : ""));
    }
    sqlite3_busy_timeout(m_db, 2000);
    sqlite3_extended_result_codes(m_db, 1);
}

Db::~Db() {
    if (m_db) sqlite3_close_v2(m_db);
}

Db Db::copy_into_memory() const {
    Db mem(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    mem.m_path = m_path;
    sqlite3_backup* b = sqlite3_backup_init(mem.m_db, "main", m_db, "main");
    if (!b) mem.fail("cannot copy into memory");
    const int rc = sqlite3_backup_step(b, -1);
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) fail("cannot copy into memory");
    return mem;
}

Db& Db::operator=(Db&& other) noexcept {
    if (this != &other) {
        if (m_db) sqlite3_close_v2(m_db);
        m_db = other.m_db;
        m_path = std::move(other.m_path);
        other.m_db = nullptr;
    }
    return *this;
}

void Db::fail(const std::string& what) const {
    std::string msg = m_db ? sqlite3_errmsg(m_db) : "no connection";
    const int code = m_db ? sqlite3_extended_errcode(m_db) : 0;
    if ((code & 0xff) == SQLITE_NOTADB) msg = "not a CacheLens session (not an SQLite database)";
    if ((code & 0xff) == SQLITE_CORRUPT) msg = "the database file is corrupt (" + msg + ")";
    if ((code & 0xff) == SQLITE_READONLY || (code & 0xff) == SQLITE_CANTOPEN)
        msg += write_access_hint(m_path);
    throw SessionError(m_path + ": " + what + ": " + msg);
}

void Db::exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        sqlite3_free(err);
        fail("SQL failed");
    }
}

int64_t Db::pragma_int(const std::string& name) {
    Stmt s(*this, "PRAGMA " + name);
    if (!s.step()) return 0;
    return s.col_int(0);
}

Stmt::Stmt(const Db& db, const std::string& sql) : m_db(db) {
    if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &m_stmt, nullptr) != SQLITE_OK)
        db.fail("cannot prepare statement");
}

Stmt::~Stmt() {
    sqlite3_finalize(m_stmt);
}

Stmt& Stmt::bind(int i, int64_t v) {
    sqlite3_bind_int64(m_stmt, i, v);
    return *this;
}
Stmt& Stmt::bind(int i, double v) {
    sqlite3_bind_double(m_stmt, i, v);
    return *this;
}
Stmt& Stmt::bind_null(int i) {
    sqlite3_bind_null(m_stmt, i);
    return *this;
}
Stmt& Stmt::bind(int i, const std::string& v) {
    sqlite3_bind_text(m_stmt, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
}
Stmt& Stmt::bind_blob(int i, const std::vector<uint8_t>& v) {
    sqlite3_bind_blob(m_stmt, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
}

bool Stmt::step() {
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    m_db.fail("statement failed");
}

void Stmt::run() {
    while (step()) {
    }
    reset();
}

void Stmt::reset() {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
}

std::string Stmt::col_text(int i) const {
    const auto* t = sqlite3_column_text(m_stmt, i);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(m_stmt, i)))
             : "";
}

}  // namespace cl::sessions

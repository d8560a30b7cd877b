// A thin RAII layer over the SQLite C API for the session store (one connection per thread).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sessions/blob_codec.h"

namespace cl::sessions {

class Db {
public:
    Db() = default;
    // flags: SQLITE_OPEN_READONLY or SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE. Throws
    // SessionError.
    Db(const std::string& path, int flags);
    ~Db();
    Db(Db&& other) noexcept : m_db(other.m_db), m_path(std::move(other.m_path)) {
        other.m_db = nullptr;
    }
    Db& operator=(Db&& other) noexcept;
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;

    // An in-memory copy of the whole database (sqlite3_backup), named by this file's path: an old
    // read-only session is migrated there instead of on disk. Throws SessionError.
    Db copy_into_memory() const;

    sqlite3* get() const { return m_db; }
    const std::string& path() const { return m_path; }
    void exec(const std::string& sql);
    int64_t pragma_int(const std::string& name);
    [[noreturn]] void fail(const std::string& what) const;

private:
    sqlite3* m_db = nullptr;
    std::string m_path;
};

class Stmt {
public:
    Stmt(const Db& db, const std::string& sql);
    ~Stmt();
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    Stmt& bind(int i, int64_t v);
    Stmt& bind(int i, double v);
    Stmt& bind(int i, const std::string& v);
    Stmt& bind_null(int i);
    Stmt& bind_blob(int i, const std::vector<uint8_t>& v);
    bool step();  // true while a row is available
    void run();   // step to completion and reset
    void reset();

    int64_t col_int(int i) const { return sqlite3_column_int64(m_stmt, i); }
    double col_double(int i) const { return sqlite3_column_double(m_stmt, i); }
    std::string col_text(int i) const;
    const uint8_t* col_blob(int i) const {
        return static_cast<const uint8_t*>(sqlite3_column_blob(m_stmt, i));
    }
    size_t col_bytes(int i) const { return static_cast<size_t>(sqlite3_column_bytes(m_stmt, i)); }
    bool col_null(int i) const { return sqlite3_column_type(m_stmt, i) == SQLITE_NULL; }

private:
    const Db& m_db;
    sqlite3_stmt* m_stmt = nullptr;
};

}  // namespace cl::sessions

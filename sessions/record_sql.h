// SQL for the field tables of record_schema.h: the column lists, binding a record's fields to a
// statement and reading them back. The session writer and reader use only these, so the SQL of
// a record is never spelled out by hand.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "sessions/record_schema.h"
#include "sessions/sqlite_util.h"

namespace cl::sessions {

// One value in and out of SQL by its column type (JSON columns hold the value's JSON text).
void bind_value(Stmt& s, int index, Column column, const json& value);
json column_value(const Stmt& s, int index, Column column);

// "a, b, c": the columns of the fields that have one, in table order.
template <typename Record>
std::string column_list(const std::vector<Field<Record>>& fields) {
    std::string out;
    for (const auto& f : fields)
        if (f.column != Column::None) out += (out.empty() ? "" : ", ") + std::string(f.sql_name());
    return out;
}

// The fields whose columns `table` of this file has (a file written as an older schema version
// lacks the columns added since; fields without a column are kept).
template <typename Record>
std::vector<Field<Record>> fields_in_table(const Db& db, const std::string& table,
                                           const std::vector<Field<Record>>& fields) {
    std::set<std::string> columns;
    Stmt s(db, "SELECT name FROM pragma_table_info('" + table + "')");
    while (s.step()) columns.insert(s.col_text(0));
    std::vector<Field<Record>> out;
    for (const auto& f : fields)
        if (f.column == Column::None || columns.count(std::string(f.sql_name()))) out.push_back(f);
    return out;
}

template <typename Record>
int column_count(const std::vector<Field<Record>>& fields) {
    int n = 0;
    for (const auto& f : fields) n += f.column != Column::None;
    return n;
}

// Binds the column fields of `r` from parameter `first` on; returns the next parameter index.
template <typename Record>
int bind_fields(Stmt& s, int first, const std::vector<Field<Record>>& fields, const Record& r) {
    for (const auto& f : fields)
        if (f.column != Column::None) bind_value(s, first++, f.column, f.get(r));
    return first;
}

// Reads the columns selected by column_list(fields) from result column `first` on into `r`
// (derived fields are skipped); a value that does not fit throws SessionError naming the column.
template <typename Record>
void read_fields(const Stmt& s, int first, const std::vector<Field<Record>>& fields, Record& r,
                 const std::string& where) {
    for (const auto& f : fields) {
        if (f.column == Column::None) continue;
        const int index = first++;
        if (f.derived()) continue;
        try {
            f.set(r, column_value(s, index, f.column));
        } catch (const std::exception& e) {
            throw SessionError(where + ": column '" + std::string(f.sql_name()) + "': " + e.what());
        }
    }
}

// The same columns as JSON keyed by field name, derived ones included (for the per-step CSV).
template <typename Record>
json read_fields_json(const Stmt& s, int first, const std::vector<Field<Record>>& fields) {
    json j = json::object();
    for (const auto& f : fields)
        if (f.column != Column::None) j[std::string(f.name)] = column_value(s, first++, f.column);
    return j;
}

}  // namespace cl::sessions

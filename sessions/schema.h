// Session schema: identification, versions and migrations (docs/session-format.md).
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "sessions/sqlite_util.h"

namespace cl::sessions {

constexpr int64_t kApplicationId = 0x434C4E53;  // 'CLNS'
constexpr int kCurrentSchema = 9;
constexpr int kOldestSupportedSchema = 1;

// Creates an empty session at `version` (tests create v1 fixtures with the v1 writer this way).
void create_schema(Db& db, int version = kCurrentSchema);
// Validates application_id and user_version; migrates older files in order (one transaction);
// refuses newer or foreign files with a clear message. Returns the version found on disk.
int check_and_migrate(Db& db, bool allow_write);
bool table_exists(Db& db, const std::string& table);
// Deletes one run's rows from every table (v5: and its comparison memberships; comparisons left
// empty go too). Inside the caller's transaction.
void delete_run_rows(Db& db, int64_t run_id);
// Deletes a comparison and every run that no other comparison holds, except `kept_runs` (v5).
void delete_comparison_rows(Db& db, int64_t comparison_id, const std::set<int64_t>& kept_runs);
// Version check only (read-only): throws SessionError for foreign, newer or unsupported files.
int check_version(Db& db);

}  // namespace cl::sessions

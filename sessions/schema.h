// Session schema: identification, versions and migrations (docs/session-format.md).
#pragma once

#include <cstdint>

#include "sessions/sqlite_util.h"

namespace cl::sessions {

constexpr int64_t kApplicationId = 0x434C4E53;  // 'CLNS'
constexpr int kCurrentSchema = 4;
constexpr int kOldestSupportedSchema = 1;

// Creates an empty session at `version` (tests create v1 fixtures with the v1 writer this way).
void create_schema(Db& db, int version = kCurrentSchema);
// Validates application_id and user_version; migrates older files in order (one transaction);
// refuses newer or foreign files with a clear message. Returns the version found on disk.
int check_and_migrate(Db& db, bool allow_write);
// Version check only (read-only): throws SessionError for foreign, newer or unsupported files.
int check_version(Db& db);

}  // namespace cl::sessions

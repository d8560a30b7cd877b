// Reports: results over many runs that a session keeps beside its runs (format v4, table
// `report`). One kind so far, the accuracy-vs-steps sweep (engine/trace/accuracy_sweep.h); its
// JSON form here is the one `cachelens-cli sweep-steps --json` writes and the session stores.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/trace/accuracy_sweep.h"
#include "sessions/sqlite_util.h"

namespace cl::sessions {

constexpr const char* kAccuracySweepKind = "accuracy-vs-steps";

nlohmann::json to_json(const trace::AccuracySweep& sweep);
// Throws SessionError naming `where` (a file, a report id) and the field that is missing or wrong.
trace::AccuracySweep accuracy_sweep_from_json(const nlohmann::json& j, const std::string& where);

// Inserts a report row (the caller owns the transaction).
void insert_report(Db& db, const std::string& kind, const std::string& body);
// Every accuracy sweep in the file, oldest first (none in files older than v4). Throws
// SessionError naming the file and the report when one is malformed.
std::vector<trace::AccuracySweep> read_accuracy_sweeps(const Db& db);

}  // namespace cl::sessions

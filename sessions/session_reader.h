// SessionReader: random access to any step of any run in a session file, without LibTorch.
//
// Opening validates the file (application_id, user_version), migrates older formats in place (in
// one transaction) and marks runs left 'running' by a crashed recorder as 'aborted'. Each reader
// owns its own connection; use one reader per thread.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/trace/accuracy_sweep.h"
#include "engine/trace/trace_store.h"
#include "sessions/record_schema.h"
#include "sessions/sqlite_util.h"

namespace cl::sessions {

struct RunRecord {
    int64_t run_id = 0;  // id inside the session
    int64_t comparison_id = 0;
    trace::RunInfo info;  // info.run_id == run_id
    trace::RunStatus status = trace::RunStatus::Running;
    std::optional<trace::RunSummary> summary;
    std::string note;
    std::string started_utc, ended_utc;
    int64_t step_count = 0;
};

// A comparison: the runs shown side by side, by column (a run can sit in several: the columns a
// slider move did not re-run carry over into the next comparison).
struct ComparisonRecord {
    int64_t comparison_id = 0;
    std::string created_utc;
    std::vector<int64_t> run_ids;  // by column
};

struct SessionInfo {
    std::string path, name, created_utc, app_version;
    int schema_version = 0;        // after migration
    int schema_version_found = 0;  // on disk when opened
    int64_t file_bytes = 0;
    int aborted_on_open = 0;  // runs found 'running' and marked aborted
};

class SessionReader {
public:
    // Throws SessionError naming the file: missing, not SQLite, another database, newer version,
    // corrupt. `repair` (default) allows the migration and the aborted-run fix-up to write.
    static std::unique_ptr<SessionReader> open(const std::string& path, bool repair = true);

    const SessionInfo& info() const { return m_info; }
    std::vector<RunRecord> runs();
    // Every comparison holding at least one run, oldest first.
    std::vector<ComparisonRecord> comparisons();
    // Bytes each run's records take (step arrays and attention maps; SQLite's page overhead
    // aside), by run id: what deleting a run would give back.
    std::map<int64_t, int64_t> run_bytes();
    // Every step's scalars (the step table, record_schema.h's step_fields()) as JSON keyed by
    // field name, without decoding any array: what the per-step CSV and listings need.
    std::vector<json> step_scalars(int64_t run_id);
    // One step's full record. Attention maps: every layer when `layers` is empty, none for {-2}.
    std::shared_ptr<trace::StepRecord> load_step(int64_t run_id, int32_t step,
                                                 const std::vector<int32_t>& layers = {});
    // Fills `store` (a replay store) with the given runs (all when empty), every step complete.
    void load_into(trace::TraceStore& store, const std::vector<int64_t>& run_ids = {},
                   bool with_attention = true);
    // The accuracy-vs-steps sweeps stored in the file (sessions/reports.h), oldest first.
    std::vector<trace::AccuracySweep> accuracy_sweeps();
    // Decodes every blob and runs SQLite's integrity check; returns problems (empty = healthy).
    std::vector<std::string> check();

    // Maintenance (need a writable file).
    void delete_run(int64_t run_id);
    // A comparison and the runs no other comparison holds.
    void delete_comparison(int64_t comparison_id);
    void rename(const std::string& name);
    void set_note(int64_t run_id, const std::string& note);
    void vacuum();
    // A consistent, compacted copy of the whole session at `destination` (SQLite VACUUM INTO).
    void copy_to(const std::string& destination);

private:
    explicit SessionReader(const std::string& path, bool repair);
    static trace::RunSummary read_summary(const Stmt& s, int column, const std::string& where);
    std::vector<int32_t> read_initial_tokens(int64_t run_id, const std::string& where);
    void read_arrays(int64_t run_id, trace::StepRecord& r, const std::string& where);
    void read_attention(int64_t run_id, const std::vector<int32_t>& layers, trace::StepRecord& r,
                        const std::string& where);
    Db m_db;
    SessionInfo m_info;
    bool m_writable = false;
};

}  // namespace cl::sessions

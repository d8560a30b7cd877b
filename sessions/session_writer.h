// SessionWriter: records runs into a session file while the engine runs.
//
// It is a TraceSink: the engine thread only enqueues (a short lock, never I/O); one writer thread
// owns the SQLite connection and commits one transaction per batch of steps (every `batch_steps`
// records or `batch_ms`). WAL mode, so a crash loses at most the last batch and readers can open
// the file while it is written. A run is 'running' until on_run_end marks it complete/aborted; a
// reader that finds 'running' runs after a crash marks them aborted.
// Errors (full disk, read-only location) are reported by error(); the unwritten records stay in
// memory (unwritten_steps()) and nothing already committed is lost.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <variant>

#include "sessions/record_schema.h"

#include "engine/trace/accuracy_sweep.h"
#include "engine/trace/probe.h"
#include "sessions/sqlite_util.h"

namespace cl::sessions {

struct WriterOptions {
    bool attention_means = true;        // head-mean attention for every layer at every step
    std::set<int32_t> per_head_layers;  // layers whose per-head maps are recorded too
    // The bytes a run's head-mean maps may take before compression: the engine pools them into
    // tiles to fit (engine/trace/attention_detail.h); layers listed here are never pooled.
    double attention_budget_bytes = trace::kDefaultAttentionBudgetBytes;
    std::set<int32_t> full_resolution_layers;
    // Attention precision: 4 ('rowmax-u4', the default: 15 levels of the row maximum, two per
    // byte) or 8 ('rowmax-u8', for figures that need the finer levels; ~1.7x the file size).
    int attention_bits = 4;
    bool want_oracle = false;  // ask the engine for oracle comparisons
    bool want_drift = false;   // ask the engine for the drift probe
    int batch_steps = 32;
    int batch_ms = 100;
    // Records waiting for the writer thread at most: past this the engine waits for it to catch
    // up to half. The writer yields its core to the engine, so in loop mode at full speed it fell
    // behind for good and the queue (every step's attention maps) grew by megabytes per lap.
    size_t max_queued = 512;
    int schema_version = 0;  // 0 = current; tests write v1 fixtures with 1
    std::string name;        // session display name (new files)
};

class SessionWriter final : public trace::TraceSink {
public:
    // Creates `path` (or appends runs to an existing session). Throws SessionError naming the file.
    static std::unique_ptr<SessionWriter> open(const std::string& path, WriterOptions options = {});
    ~SessionWriter() override;

    bool wants(const trace::ProbeRequest& request) const override;
    double attention_budget_bytes() const override { return m_options.attention_budget_bytes; }
    void on_run_start(const trace::RunInfo& info) override;
    void publish(std::shared_ptr<const trace::StepRecord> record) override;
    void on_run_end(int32_t run_id, const trace::RunSummary& summary) override;

    // Starts a new comparison: the runs shown side by side, by column. `runs_by_column` holds an
    // engine run id per column: runs already recorded carry over (a slider move re-runs one
    // column), the others are runs about to start. A loop `lap` replaces the previous comparison
    // when that was a lap too (dropping the runs only it held), unless `keep_every_lap`. Without
    // any call, every run of this writer joins one comparison in the order it starts (the CLI).
    void begin_comparison(const std::vector<int32_t>& runs_by_column, bool lap = false,
                          bool keep_every_lap = false);

    // Queues a report (an accuracy sweep) to be stored beside the runs; flush() commits it.
    void add_report(const trace::AccuracySweep& sweep);

    // Blocks until everything queued so far is committed (or failed). Returns error().empty().
    bool flush();
    std::string error() const;
    // CPU time the writer thread has used so far (quantising, compressing, SQLite), in ms: what
    // recording costs in total, whatever the machine's load.
    double cpu_ms() const;
    size_t unwritten_steps() const;
    const std::string& path() const { return m_path; }

private:
    SessionWriter(std::string path, WriterOptions options);
    struct RunStart {
        trace::RunInfo info;
    };
    struct RunEnd {
        int32_t run_id;
        trace::RunSummary summary;
    };
    struct Report {
        std::string kind, body;
    };
    struct NewComparison {
        std::vector<int32_t> runs_by_column;
        bool lap = false, keep_every_lap = false;
    };
    using Item = std::variant<RunStart, std::shared_ptr<const trace::StepRecord>, RunEnd, Report,
                              NewComparison>;

    void thread_main();
    void write_batch(std::deque<Item>& batch);
    void write_item(const Item& item);
    void write_run_start(const trace::RunInfo& info);
    void write_run_end(int32_t run_id, const trace::RunSummary& summary);
    void write_new_comparison(const NewComparison& c);
    void ensure_comparison_row();
    void add_to_comparison(int64_t db_run, int32_t column);
    void enqueue(Item item);
    void write_step(const trace::StepRecord& r);
    void write_attention(int64_t run, const trace::StepRecord& r);
    void insert_array(int64_t run, int32_t step, const std::string& name, const EncodedArray& e);

    std::string m_path;
    WriterOptions m_options;
    Db m_db;
    // Writer thread only: the comparison runs join, whether its row exists yet (a comparison
    // nobody ran into is never written), the next free column and the columns planned for runs
    // that have not started yet.
    int32_t m_comparison = 0;
    bool m_comparison_written = false;
    bool m_comparison_is_lap = false;
    int64_t m_steps_in_comparison = 0;    // steps written since the comparison began
    bool m_has_comparison_tables = true;  // v5 and later
    bool m_has_attention_tiles = true;    // v8 and later: maps name their tiles
    int32_t m_next_column = 0;
    std::map<int32_t, int32_t> m_planned_column;  // engine run id -> column
    std::map<int32_t, int64_t> m_db_run;          // engine run id -> session run id
    // The record fields this file has columns for (all of them unless it is an older version).
    std::vector<Field<trace::RunInfo>> m_run_fields;
    std::vector<Field<trace::StepRecord>> m_step_fields;
    // Prepared once, used for every step (after m_db: finalised before the connection closes).
    std::unique_ptr<Stmt> m_insert_step, m_insert_array;

    mutable std::mutex m_mutex;
    std::condition_variable m_cv, m_done_cv;
    std::deque<Item> m_queue;
    std::deque<Item> m_unwritten;  // kept in memory after a write error
    uint64_t m_enqueued = 0, m_processed = 0;
    bool m_stop = false;
    double m_cpu_ms = 0;
    std::string m_error;
    std::thread m_thread;
};

}  // namespace cl::sessions

// EngineBridge: the single engine thread that owns the model and every column's Generator, fed
// by a tag-coalescing CommandQueue. The UI never calls the engine: it posts commands and, once per
// frame, takes a snapshot of the columns (a short lock, then drawing without any lock). Status
// counters are atomics. Torch-free header.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bridge/command_queue.h"
#include "engine/generation/generator.h"
#include "engine/kernels/kernel_choice.h"
#include "sessions/session_writer.h"
#include "viz/viz_context.h"

namespace cl::app {

struct ColumnSpec {
    std::string policy;
    std::map<std::string, double> params;
    std::shared_ptr<Model> model;  // null: the bridge's model (another: columns side by side)
};

struct RunSetup {
    std::string prompt;
    bool chat_template = true;
    GenerationConfig config;
    std::vector<ColumnSpec> columns;
    bool oracle = false;
    // The K/V drift probe (kv-drift panel): two small host copies per layer and step, on by
    // default; worth turning off for large models.
    bool drift = true;
    // The bytes each run's head-mean attention maps may take (engine/trace/attention_detail.h:
    // pooled into tiles past it) and the layers never pooled.
    double attention_budget = trace::kDefaultAttentionBudgetBytes;
    std::set<int32_t> full_attention_layers;
    // The kernel set the runs take (engine/kernels/kernel_choice.h), set on the engine thread
    // before they start: a process-wide switch, so every column runs at the same one.
    KernelSet kernels = KernelSet::Fast;
};

class EngineBridge {
public:
    explicit EngineBridge(std::shared_ptr<Model> model, int threads = 1);
    ~EngineBridge();

    // All of these post a command and return at once.
    void configure(const RunSetup& setup);  // new runs for every column (step 0)
    void advance(int steps);                // every column forward by `steps`
    void advance_to(int step);              // every column to `step` (or its end)
    void set_playing(bool playing);
    void set_loop(bool loop);  // regenerate continuously (throughput chart)
    // Recording a loop keeps its last lap only (each lap replaces the previous comparison)
    // unless every lap is asked for.
    void set_record_every_lap(bool every_lap);
    void set_param(size_t column, const std::string& key, double value);  // re-runs that column
    void set_speed(int steps_per_second);                                 // 0 = as fast as possible
    void cancel();  // stops a long re-run or advance in progress
    // Record every run into `path` (a session file; appended to). Empty = stop recording.
    void set_recording(const std::string& path);
    std::string recording_path() const;
    // Why the last set_recording could not open its file ("" = it did, or none was asked for).
    std::string recording_error() const;
    // Waits until everything recorded so far is committed; returns the writer's error ("" = fine).
    std::string flush_recording();

    // Thread-safe copy of every column for this frame.
    std::vector<viz::RunView> snapshot() const;
    std::shared_ptr<Model> model() const { return m_model; }
    bool playing() const { return m_playing.load(); }
    bool busy() const { return m_busy.load(); }
    int max_step() const { return m_max_step.load(); }
    uint64_t generation() const { return m_generation.load(); }
    std::string last_error() const;
    // The re-run or advance in progress and how far it is ("" when idle).
    std::string work() const;

private:
    struct Column;
    void thread_main();
    void rebuild(size_t column);
    // Tells the recorder which runs the next comparison shows, before `rerun` columns are
    // rebuilt (in ascending order): they get the ids rebuild() assigns; the others carry over.
    void announce_comparison(const std::vector<size_t>& rerun, bool lap);
    void rebuild_all(bool lap);
    bool step_column(size_t column);  // false when finished
    void sync_to(size_t column, int step);
    std::string progress_text(size_t column, int from, int target, double seconds) const;

    std::shared_ptr<Model> m_model;
    int m_threads;
    CommandQueue m_queue;
    std::thread m_thread;
    std::atomic<bool> m_stop{false}, m_playing{false}, m_loop{false}, m_busy{false},
        m_cancel{false}, m_record_every_lap{false};
    std::atomic<int> m_max_step{0}, m_speed{0};
    std::atomic<uint64_t> m_generation{0};
    RunSetup m_setup;  // engine thread only
    // Structure: changed by the engine thread under m_data_mutex (snapshot() reads it from the UI
    // thread); read by the engine thread without it. Column data: guarded.
    std::vector<std::unique_ptr<Column>> m_columns;
    mutable std::mutex m_data_mutex;
    std::string m_error;
    std::string m_work;  // guarded by m_data_mutex
    int32_t m_next_run_id = 0;
    // The engine thread creates and uses it; flush from any thread.
    std::unique_ptr<sessions::SessionWriter> m_writer;
    std::string m_recording_path;   // guarded by m_data_mutex
    std::string m_recording_error;  // guarded by m_data_mutex
};

}  // namespace cl::app

#include "bridge/engine_bridge.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>

#include "engine/base/errors.h"

namespace cl::app {

// One column's live data; `view` is what the UI copies.
struct EngineBridge::Column : public trace::TraceSink {
    std::unique_ptr<Generator> gen;
    viz::RunView view;  // guarded by the bridge's data mutex
    std::mutex* mutex = nullptr;
    std::atomic<uint64_t>* generation = nullptr;
    bool want_oracle = false;
    bool want_drift = true;
    double attention_budget = trace::kDefaultAttentionBudgetBytes;
    std::set<int32_t> full_attention_layers;
    trace::TraceSink* recorder = nullptr;  // the session writer, when recording

    bool wants(const trace::ProbeRequest& r) const override {
        if (r.kind == trace::ProbeKind::Oracle) return want_oracle;
        if (r.kind == trace::ProbeKind::Drift) return want_drift;
        if (r.kind == trace::ProbeKind::FullResolution)
            return full_attention_layers.count(r.layer) > 0 || (recorder && recorder->wants(r));
        if (r.kind == trace::ProbeKind::Attention)
            return r.head == -1 || (recorder && recorder->wants(r));
        return true;
    }
    // The app's setting decides the detail; the recording stores the same maps.
    double attention_budget_bytes() const override { return attention_budget; }
    void on_run_start(const trace::RunInfo& info) override {
        if (recorder) recorder->on_run_start(info);
        std::lock_guard lock(*mutex);
        auto throughput = std::move(view.throughput);
        view = viz::RunView{};
        view.info = info;
        view.token_text = info.token_text;
        view.throughput = std::move(throughput);
        ++*generation;
    }
    void publish(std::shared_ptr<const trace::StepRecord> r) override {
        if (recorder) recorder->publish(r);
        std::lock_guard lock(*mutex);
        for (const auto& [id, t] : r->new_token_text) view.token_text[id] = t;
        view.steps.push_back(std::move(r));
        ++*generation;
    }
    void on_run_end(int32_t id, const trace::RunSummary& s) override {
        if (recorder) recorder->on_run_end(id, s);
        std::lock_guard lock(*mutex);
        view.summary = s;
        view.throughput.push_back(static_cast<float>(s.tokens_per_s));
        if (view.throughput.size() > 240) view.throughput.erase(view.throughput.begin());
        ++*generation;
    }
};

EngineBridge::EngineBridge(std::shared_ptr<Model> model, int threads)
    : m_model(std::move(model)), m_threads(threads) {
    m_thread = std::thread([this] { thread_main(); });
}

EngineBridge::~EngineBridge() {
    m_stop = true;
    m_queue.post({"", [] {}});
    if (m_thread.joinable()) m_thread.join();
    // Unfinished runs are recorded as aborted; everything else is already committed.
    for (auto& c : m_columns)
        if (c->gen && !c->gen->done()) c->gen->finish(true);
    if (m_writer) m_writer->flush();
}

void EngineBridge::configure(const RunSetup& setup) {
    m_queue.post({"configure", [this, setup] {
                      m_setup = setup;
                      set_kernel_set(setup.kernels);
                      std::vector<std::unique_ptr<Column>> fresh;
                      for (size_t i = 0; i < setup.columns.size(); ++i) {
                          auto c = std::make_unique<Column>();
                          c->mutex = &m_data_mutex;
                          c->generation = &m_generation;
                          fresh.push_back(std::move(c));
                      }
                      {
                          // snapshot() walks the columns from the UI thread: the vector changes
                          // under the lock (clearing it unlocked freed columns being copied).
                          std::lock_guard lock(m_data_mutex);
                          m_columns.swap(fresh);
                          m_error.clear();
                      }
                      fresh.clear();  // the old columns, no longer reachable from snapshot()
                      rebuild_all(/*lap=*/false);
                      m_max_step = 0;
                      ++m_generation;
                  }});
}

void EngineBridge::advance(int steps) {
    m_queue.post({"", [this, steps] {
                      const int target = m_max_step.load() + steps;
                      for (size_t i = 0; i < m_columns.size(); ++i) sync_to(i, target);
                  }});
}

void EngineBridge::advance_to(int step) {
    m_queue.post({"advance-to", [this, step] {
                      for (size_t i = 0; i < m_columns.size(); ++i) sync_to(i, step);
                  }});
}

void EngineBridge::set_recording(const std::string& path) {
    {
        // Cleared now, not when the engine thread gets to it, so that a window polling for the
        // outcome never reads the previous attempt's failure as this one's.
        std::lock_guard lock(m_data_mutex);
        m_recording_error.clear();
    }
    m_queue.post({"recording", [this, path] {
                      if (m_writer) m_writer->flush();
                      m_writer.reset();
                      for (auto& c : m_columns) c->recorder = nullptr;
                      std::string error;
                      if (!path.empty()) {
                          try {
                              m_writer = sessions::SessionWriter::open(path);
                          } catch (const std::exception& e) {
                              error = std::string("recording off: ") + e.what();
                          }
                      }
                      std::lock_guard lock(m_data_mutex);
                      m_recording_path = m_writer ? path : "";
                      m_recording_error = error;
                      if (!error.empty()) m_error = error;
                  }});
}

std::string EngineBridge::recording_path() const {
    std::lock_guard lock(m_data_mutex);
    return m_recording_path;
}

std::string EngineBridge::recording_error() const {
    std::lock_guard lock(m_data_mutex);
    return m_recording_error;
}

std::string EngineBridge::flush_recording() {
    // Runs on the engine thread so the writer is not replaced underneath us; we wait for it.
    auto done = std::make_shared<std::promise<std::string>>();
    auto result = done->get_future();
    m_queue.post({"", [this, done] {
                      done->set_value(m_writer ? (m_writer->flush() ? "" : m_writer->error()) : "");
                  }});
    return result.get();
}

void EngineBridge::set_playing(bool playing) {
    m_playing = playing;
    m_queue.post({"wake", [] {}});
}
void EngineBridge::set_loop(bool loop) {
    m_loop = loop;
}
void EngineBridge::set_record_every_lap(bool every_lap) {
    m_record_every_lap = every_lap;
}
void EngineBridge::set_speed(int sps) {
    m_speed = sps;
}

void EngineBridge::cancel() {
    m_cancel = true;
    m_playing = false;
}

void EngineBridge::set_param(size_t column, const std::string& key, double value) {
    m_queue.post({"param/" + std::to_string(column) + "/" + key, [this, column, key, value] {
                      if (column >= m_setup.columns.size()) return;
                      m_setup.columns[column].params[key] = value;
                      const int target = m_max_step.load();
                      announce_comparison({column}, /*lap=*/false);
                      rebuild(column);
                      sync_to(column, target);  // re-run the column to where the others are
                  }});
}

std::vector<viz::RunView> EngineBridge::snapshot() const {
    std::lock_guard lock(m_data_mutex);
    std::vector<viz::RunView> out;
    out.reserve(m_columns.size());
    for (const auto& c : m_columns) out.push_back(c->view);
    return out;
}

std::string EngineBridge::work() const {
    std::lock_guard lock(m_data_mutex);
    return m_work;
}

std::string EngineBridge::last_error() const {
    std::lock_guard lock(m_data_mutex);
    return m_error;
}

void EngineBridge::announce_comparison(const std::vector<size_t>& rerun, bool lap) {
    if (!m_writer) return;
    std::vector<int32_t> runs_by_column;
    int32_t next = m_next_run_id;
    for (size_t i = 0; i < m_columns.size(); ++i) {
        const bool rebuilt = std::find(rerun.begin(), rerun.end(), i) != rerun.end();
        const auto& c = *m_columns[i];
        // Engine thread: the only writer of `view`, so reading it here needs no lock.
        runs_by_column.push_back(rebuilt ? next++ : c.gen ? c.view.info.run_id : -1);
    }
    m_writer->begin_comparison(runs_by_column, lap, m_record_every_lap);
}

void EngineBridge::rebuild_all(bool lap) {
    std::vector<size_t> all(m_columns.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    announce_comparison(all, lap);
    for (size_t i : all) rebuild(i);
}

void EngineBridge::rebuild(size_t i) {
    auto& c = *m_columns[i];
    GenerationRequest req;
    req.prompt_text = m_setup.prompt;
    req.chat_template = m_setup.chat_template;
    req.config = m_setup.config;
    req.policy = m_setup.columns[i].policy;
    req.params = m_setup.columns[i].params;
    req.run_id = m_next_run_id++;
    req.threads = m_threads;
    c.want_oracle = m_setup.oracle;
    c.want_drift = m_setup.drift;
    c.attention_budget = m_setup.attention_budget;
    c.full_attention_layers = m_setup.full_attention_layers;
    // A run replaced before it finished (new setup, slider move) is recorded as aborted.
    if (c.gen && !c.gen->done()) c.gen->finish(true);
    c.recorder = m_writer.get();
    try {
        const auto& model = m_setup.columns[i].model;
        c.gen = std::make_unique<Generator>(model ? model : m_model, req, &c);
    } catch (const std::exception& e) {
        c.gen.reset();
        std::lock_guard lock(m_data_mutex);
        m_error = e.what();
        c.view.status = std::string("error: ") + e.what();
    }
}

bool EngineBridge::step_column(size_t i) {
    auto& c = *m_columns[i];
    if (!c.gen || c.gen->done()) return false;
    try {
        c.gen->step();
        if (c.gen->done()) c.gen->finish(false);
    } catch (const std::exception& e) {
        std::lock_guard lock(m_data_mutex);
        m_error = e.what();
        c.view.status = std::string("error: ") + e.what();
        c.gen.reset();
        return false;
    }
    return true;
}

// "dkv-decode: step 12 of 40 (30%), ~3 s left": a column's progress towards `target`, the time
// left extrapolated from the steps made so far in this call.
std::string EngineBridge::progress_text(size_t i, int from, int target, double seconds) const {
    const auto& c = *m_columns[i];
    const int done = c.gen ? c.gen->steps_done() : 0;
    char text[160];
    const int percent = target > 0 ? 100 * done / target : 100;
    if (done > from && done < target) {
        const double left = seconds / (done - from) * (target - done);
        std::snprintf(text, sizeof text, "%s: step %d of %d (%d%%), ~%.0f s left",
                      m_setup.columns[i].policy.c_str(), done, target, percent, std::ceil(left));
    } else {
        std::snprintf(text, sizeof text, "%s: step %d of %d (%d%%)",
                      m_setup.columns[i].policy.c_str(), done, target, percent);
    }
    return text;
}

void EngineBridge::sync_to(size_t i, int step) {
    m_busy = true;
    auto& c = *m_columns[i];
    const int from = c.gen ? c.gen->steps_done() : 0;
    // Planned steps: a run that decodes several tokens a step may end sooner.
    const int target = c.gen ? std::min(step, static_cast<int>(c.gen->info().steps)) : step;
    const auto t0 = std::chrono::steady_clock::now();
    auto report = [&] {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::string text = progress_text(i, from, target, seconds);
        std::lock_guard lock(m_data_mutex);
        c.view.status = "running to step " + std::to_string(target) + " \u2014 " + text;
        m_work = text;
    };
    report();
    while (c.gen && !c.gen->done() && c.gen->steps_done() < step && !m_cancel) {
        if (!step_column(i)) break;
        report();
    }
    {
        std::lock_guard lock(m_data_mutex);
        c.view.status.clear();
        m_work.clear();
    }
    int max_step = 0;
    for (const auto& col : m_columns)
        max_step = std::max(max_step, col->gen ? col->gen->steps_done() : 0);
    m_max_step = max_step;
    m_busy = false;
}

void EngineBridge::thread_main() {
    set_thread_count(m_threads);
    while (!m_stop) {
        auto cmd = m_queue.pop(std::chrono::milliseconds(m_playing ? 0 : 50));
        if (cmd) {
            m_cancel = false;  // a cancel applies to the work in progress, not to later commands
            cmd->run();
            continue;
        }
        if (!m_playing || m_columns.empty()) continue;
        // Play: one step for every column, then pace by speed.
        const auto t0 = std::chrono::steady_clock::now();
        bool any = false;
        for (size_t i = 0; i < m_columns.size(); ++i) any |= step_column(i);
        int max_step = 0;
        for (const auto& col : m_columns)
            max_step = std::max(max_step, col->gen ? col->gen->steps_done() : 0);
        m_max_step = max_step;
        if (!any) {
            if (m_loop) {
                rebuild_all(/*lap=*/true);  // next lap; throughput keeps its history
                m_max_step = 0;
            } else {
                m_playing = false;
            }
        }
        const int sps = m_speed.load();
        if (sps > 0) {
            const auto budget = std::chrono::milliseconds(1000 / sps);
            const auto spent = std::chrono::steady_clock::now() - t0;
            if (spent < budget) std::this_thread::sleep_for(budget - spent);
        }
    }
}

}  // namespace cl::app

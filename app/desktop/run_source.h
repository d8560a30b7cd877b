// RunSource: where the columns on screen come from. The window, the transport and the panels
// observe one source and never ask which kind it is; live runs (LiveSource: the engine thread
// behind EngineBridge) and replays (ReplaySource: a session file, no model) are its two
// implementations.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "bridge/engine_bridge.h"
#include "sessions/session_reader.h"
#include "viz/viz_context.h"

namespace cl::app {

class RunSource {
public:
    virtual ~RunSource() = default;
    // The columns for this frame, completed for what `view` shows (a replay reads the visible
    // step's attention from its file on demand). Valid until the next call.
    virtual std::vector<viz::RunView>& runs(const viz::ViewState& view) = 0;
    virtual int available_steps() const = 0;
    // Changes whenever runs() has something new (the window redraws then).
    virtual uint64_t generation() const = 0;
    // Asks for more steps; false when this source cannot make steps (a replay has them all).
    virtual bool advance(int steps) = 0;
    virtual bool advance_to(int step) = 0;
    virtual bool playing() const = 0;
    virtual void set_playing(bool playing) = 0;
    virtual bool busy() const = 0;
    virtual std::string last_error() const = 0;
    // The session file holding these runs with everything so far committed, "" when there is
    // none; `error` is set when committing failed.
    virtual std::string session_file(std::string& error) = 0;
    // A word for the status bar: "replay", "re-running" or "".
    virtual std::string activity() const = 0;
    // Reports over many runs (accuracy sweeps) that belong with these runs; none by default.
    virtual const std::vector<trace::AccuracySweep>& accuracy_sweeps() const {
        static const std::vector<trace::AccuracySweep> none;
        return none;
    }
};

// Live runs: owns the engine thread; the engine-only controls (policy parameters, speed, loop,
// recording) talk to bridge() directly.
class LiveSource final : public RunSource {
public:
    LiveSource(std::shared_ptr<Model> model, int threads);
    EngineBridge& bridge() { return m_bridge; }

    std::vector<viz::RunView>& runs(const viz::ViewState& view) override;
    int available_steps() const override { return m_bridge.max_step(); }
    uint64_t generation() const override { return m_bridge.generation(); }
    bool advance(int steps) override;
    bool advance_to(int step) override;
    bool playing() const override { return m_bridge.playing(); }
    void set_playing(bool playing) override { m_bridge.set_playing(playing); }
    bool busy() const override { return m_bridge.busy(); }
    std::string last_error() const override { return m_bridge.last_error(); }
    std::string session_file(std::string& error) override;
    std::string activity() const override {
        if (!busy()) return "";
        const std::string work = m_bridge.work();
        return work.empty() ? "running" : "running " + work;
    }

private:
    EngineBridge m_bridge;
    std::vector<viz::RunView> m_runs;  // the engine's columns, copied when it published
    uint64_t m_copied_generation = ~uint64_t{0};
};

// A replay of one comparison in a session file (the latest unless asked). Attention maps are
// read for the step and layer on screen only, so a long session opens at once.
class ReplaySource final : public RunSource {
public:
    // Throws (SessionError and friends) naming the file; nothing is half-opened.
    static std::unique_ptr<ReplaySource> open(const std::string& path, bool repair = true,
                                              int64_t comparison_id = -1);
    const std::string& path() const { return m_path; }
    size_t run_count() const { return m_runs.size(); }
    // Every comparison in the file, oldest first, and the one shown.
    const std::vector<sessions::ComparisonRecord>& comparisons() const { return m_comparisons; }
    int64_t comparison_id() const { return m_comparison; }

    std::vector<viz::RunView>& runs(const viz::ViewState& view) override;
    int available_steps() const override;
    uint64_t generation() const override { return 0; }
    bool advance(int) override { return false; }
    bool advance_to(int) override { return false; }
    bool playing() const override { return false; }
    void set_playing(bool) override {}
    bool busy() const override { return false; }
    std::string last_error() const override { return ""; }
    std::string session_file(std::string&) override { return m_path; }
    std::string activity() const override { return "replay"; }
    const std::vector<trace::AccuracySweep>& accuracy_sweeps() const override { return m_sweeps; }

private:
    ReplaySource() = default;
    void fetch_visible_attention(const viz::ViewState& view);

    std::string m_path;
    std::unique_ptr<sessions::SessionReader> m_reader;
    std::vector<viz::RunView> m_runs;
    std::vector<trace::AccuracySweep> m_sweeps;
    std::vector<sessions::ComparisonRecord> m_comparisons;
    int64_t m_comparison = -1;
    std::set<std::tuple<int32_t, int32_t, int32_t>> m_fetched;  // (run, step, layer)
};

}  // namespace cl::app

#include "app/desktop/run_source.h"

#include "app/desktop/answer_check.h"

namespace cl::app {

LiveSource::LiveSource(std::shared_ptr<Model> model, int threads)
    : m_bridge(std::move(model), threads) {}

std::vector<viz::RunView>& LiveSource::runs(const viz::ViewState&) {
    // Copy the engine's columns only when it published something new, not on every frame.
    const uint64_t generation = m_bridge.generation();
    if (generation != m_copied_generation || m_runs.empty()) {
        m_runs = m_bridge.snapshot();
        check_answers(m_runs);
    }
    m_copied_generation = generation;
    return m_runs;
}

bool LiveSource::advance(int steps) {
    m_bridge.advance(steps);
    return true;
}

bool LiveSource::advance_to(int step) {
    m_bridge.advance_to(step);
    return true;
}

std::string LiveSource::session_file(std::string& error) {
    std::string path = m_bridge.recording_path();
    if (!path.empty()) error = m_bridge.flush_recording();
    return path;
}

}  // namespace cl::app

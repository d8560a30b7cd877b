#include <algorithm>

#include "app/desktop/answer_check.h"
#include "app/desktop/run_source.h"
#include "engine/trace/trace_store.h"

namespace cl::app {

namespace {

viz::RunView replay_view(const trace::TraceStore& store, int32_t id) {
    viz::RunView v;
    auto info = store.run_info(id);
    if (!info) throw std::logic_error("replay: the trace store has no run " + std::to_string(id));
    v.info = std::move(*info);
    v.steps = store.steps(id);
    v.summary = store.run_summary(id);
    v.token_text = v.info.token_text;
    for (const auto& s : v.steps)
        for (const auto& [tid, t] : s->new_token_text) v.token_text[tid] = t;
    v.live = false;
    if (v.summary && v.summary->status != trace::RunStatus::Complete)
        v.status = trace::to_string(v.summary->status);
    return v;
}

}  // namespace

std::unique_ptr<ReplaySource> ReplaySource::open(const std::string& path, bool repair,
                                                 int64_t comparison_id) {
    auto reader = sessions::SessionReader::open(path, repair);
    std::unique_ptr<ReplaySource> source(new ReplaySource);
    source->m_sweeps = reader->accuracy_sweeps();
    source->m_comparisons = reader->comparisons();
    if (source->m_comparisons.empty() && source->m_sweeps.empty())
        throw sessions::SessionError(path + ": the session holds no runs");
    // The comparison asked for (the latest by default): its runs side by side, by column.
    const sessions::ComparisonRecord* shown = nullptr;
    for (const auto& c : source->m_comparisons)
        if (comparison_id < 0 || c.comparison_id == comparison_id) shown = &c;
    if (!shown && comparison_id >= 0)
        throw sessions::SessionError(path + ": has no comparison " + std::to_string(comparison_id));
    if (shown) {
        trace::TraceStore store(false);
        reader->load_into(store, shown->run_ids, /*with_attention=*/false);  // attention: on demand
        for (int64_t id : shown->run_ids)
            source->m_runs.push_back(replay_view(store, static_cast<int32_t>(id)));
        source->m_comparison = shown->comparison_id;
    }
    check_answers(source->m_runs);
    source->m_reader = std::move(reader);
    source->m_path = path;
    return source;
}

int ReplaySource::available_steps() const {
    int n = 0;
    for (const auto& r : m_runs) n = std::max(n, static_cast<int>(r.steps.size()));
    return n;
}

std::vector<viz::RunView>& ReplaySource::runs(const viz::ViewState& view) {
    fetch_visible_attention(view);
    return m_runs;
}

void ReplaySource::fetch_visible_attention(const viz::ViewState& view) {
    const int32_t max_steps = available_steps();
    for (auto& run : m_runs) {
        const int32_t step = viz::column_step(run, view, max_steps);
        if (step < 0) continue;
        if (!m_fetched.insert({run.info.run_id, step, view.layer}).second) continue;
        try {
            auto loaded = m_reader->load_step(run.info.run_id, step, {view.layer});
            auto copy = std::make_shared<trace::StepRecord>(*run.steps[static_cast<size_t>(step)]);
            for (auto& a : loaded->attention) {
                bool present = false;
                for (const auto& b : copy->attention)
                    present |= (a.layer == b.layer && a.head == b.head);
                if (!present) copy->attention.push_back(std::move(a));
            }
            run.steps[static_cast<size_t>(step)] = copy;
        } catch (const std::exception& e) {
            run.status = std::string("attention unavailable: ") + e.what();
        }
    }
}

}  // namespace cl::app

#include "engine/trace/trace_store.h"

#include <stdexcept>

namespace cl::trace {

bool TraceStore::wants(const ProbeRequest& request) const {
    switch (request.kind) {
        case ProbeKind::StepRecord:
            return true;
        case ProbeKind::Oracle:
            return m_oracle.load();
        case ProbeKind::Drift:
            return m_drift.load();
        case ProbeKind::FullResolution: {
            std::lock_guard lock(m_mutex);
            return m_full_resolution.count(request.layer) > 0;
        }
        case ProbeKind::Attention: {
            if (request.head == -1 && m_all_attention_means.load()) return true;
            std::lock_guard lock(m_mutex);
            return m_attention_requests.count({request.layer, request.head}) > 0;
        }
    }
    return false;
}

void TraceStore::on_run_start(const RunInfo& info) {
    std::lock_guard lock(m_mutex);
    if (find(info.run_id)) throw std::invalid_argument("TraceStore: duplicate run id");
    RunTrace run;
    run.info = info;
    m_runs.push_back(std::move(run));
    m_generation.fetch_add(1, std::memory_order_release);
}

void TraceStore::publish(std::shared_ptr<const StepRecord> record) {
    std::lock_guard lock(m_mutex);
    RunTrace* run = find(record->run_id);
    if (!run) throw std::invalid_argument("TraceStore: step for an unknown run");
    // Token texts for replay are filled by the engine in RunInfo; nothing to derive here.
    run->steps.push_back(std::move(record));
    run->summary.steps = static_cast<int32_t>(run->steps.size());
    m_generation.fetch_add(1, std::memory_order_release);
}

void TraceStore::on_run_end(int32_t run_id, const RunSummary& summary) {
    std::lock_guard lock(m_mutex);
    RunTrace* run = find(run_id);
    if (!run) throw std::invalid_argument("TraceStore: end of an unknown run");
    run->summary = summary;
    m_generation.fetch_add(1, std::memory_order_release);
}

std::vector<int32_t> TraceStore::run_ids() const {
    std::lock_guard lock(m_mutex);
    std::vector<int32_t> ids;
    ids.reserve(m_runs.size());
    for (const auto& r : m_runs) ids.push_back(r.info.run_id);
    return ids;
}

std::optional<RunInfo> TraceStore::run_info(int32_t run_id) const {
    std::lock_guard lock(m_mutex);
    const RunTrace* run = find(run_id);
    if (!run) return std::nullopt;
    return run->info;
}

std::optional<RunSummary> TraceStore::run_summary(int32_t run_id) const {
    std::lock_guard lock(m_mutex);
    const RunTrace* run = find(run_id);
    if (!run) return std::nullopt;
    return run->summary;
}

size_t TraceStore::step_count(int32_t run_id) const {
    std::lock_guard lock(m_mutex);
    const RunTrace* run = find(run_id);
    return run ? run->steps.size() : 0;
}

std::shared_ptr<const StepRecord> TraceStore::step(int32_t run_id, int32_t step) const {
    std::lock_guard lock(m_mutex);
    const RunTrace* run = find(run_id);
    if (!run || step < 0 || static_cast<size_t>(step) >= run->steps.size()) return nullptr;
    return run->steps[static_cast<size_t>(step)];
}

std::vector<std::shared_ptr<const StepRecord>> TraceStore::steps(int32_t run_id) const {
    std::lock_guard lock(m_mutex);
    const RunTrace* run = find(run_id);
    return run ? run->steps : std::vector<std::shared_ptr<const StepRecord>>{};
}

RunTrace* TraceStore::find(int32_t run_id) {
    for (auto& r : m_runs)
        if (r.info.run_id == run_id) return &r;
    return nullptr;
}

const RunTrace* TraceStore::find(int32_t run_id) const {
    for (const auto& r : m_runs)
        if (r.info.run_id == run_id) return &r;
    return nullptr;
}

}  // namespace cl::trace

#include "app/cli/jsonl_trace_sink.h"

#include "engine/base/errors.h"
#include "sessions/record_schema.h"

namespace cl::cli {

using json = nlohmann::json;

// Each line is a record in the JSON form of sessions/record_schema.h plus a "type" key.

JsonlTraceSink::JsonlTraceSink(const std::string& path, std::set<trace::ProbeKind> extra)
    : m_path(path), m_out(path, std::ios::trunc), m_extra(std::move(extra)) {
    if (!m_out) throw InputError(path, "cannot open for writing");
}

void JsonlTraceSink::on_run_start(const trace::RunInfo& info) {
    json j = sessions::to_json(info);
    j["type"] = "run_start";
    m_out << j.dump() << '\n';
}

void JsonlTraceSink::publish(std::shared_ptr<const trace::StepRecord> r) {
    json j = sessions::to_json(*r, false);
    j["type"] = "step";
    m_out << j.dump() << '\n';
}

void JsonlTraceSink::on_run_end(int32_t run_id, const trace::RunSummary& s) {
    json j = sessions::to_json(s);
    j["type"] = "run_end";
    j["run_id"] = run_id;
    m_out << j.dump() << '\n';
    m_out.flush();
    if (!m_out) throw RuntimeFailure(m_path + ": write failed (disk full?)");
}

}  // namespace cl::cli

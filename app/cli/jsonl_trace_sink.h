// A TraceSink that writes a run as JSON lines: {"type":"run_start",...}, one {"type":"step",...}
// per step, {"type":"run_end",...}. For scripts and pandas; sessions (SQLite) are the full record.
#pragma once

#include <fstream>
#include <set>
#include <string>

#include "engine/trace/probe.h"

namespace cl::cli {

class JsonlTraceSink final : public trace::TraceSink {
public:
    // Throws InputError if not writable. `extra` probes (oracle, drift) are asked for too.
    explicit JsonlTraceSink(const std::string& path, std::set<trace::ProbeKind> extra = {});
    bool wants(const trace::ProbeRequest& request) const override {
        return request.kind == trace::ProbeKind::StepRecord || m_extra.count(request.kind) > 0;
    }
    void on_run_start(const trace::RunInfo& info) override;
    void publish(std::shared_ptr<const trace::StepRecord> record) override;
    void on_run_end(int32_t run_id, const trace::RunSummary& summary) override;

private:
    std::string m_path;
    std::ofstream m_out;
    std::set<trace::ProbeKind> m_extra;
};

}  // namespace cl::cli

// The live terminal view of a run: the response unmasking step by step, with a progress bar.
// On a TTY it redraws in place with ANSI colours; otherwise it prints one plain line per step.
// Shared by `generate` (live) and `replay` (recorded), which must look the same.
#pragma once

#include <cstdio>
#include <map>
#include <string>

#include "engine/trace/trace_types.h"

namespace cl::cli {

class TerminalView {
public:
    enum class Mode { Live, Steps, Quiet };
    TerminalView(const trace::RunInfo& info, Mode mode, std::FILE* out = stdout);
    void show(const trace::StepRecord& rec, int32_t planned_steps);
    void finish(const trace::RunSummary& summary);
    // The response as text: masks shown as a shaded block, the newest tokens highlighted.
    std::string render(const trace::StepRecord& rec, bool color) const;

private:
    trace::RunInfo m_info;
    Mode m_mode;
    std::FILE* m_out;
    bool m_tty;
    int m_lines_drawn = 0;
    double m_wall_ms = 0;
    int32_t m_generated = 0;
    std::map<int32_t, std::string> m_text;  // id -> display text
};

TerminalView::Mode parse_view_mode(const std::string& text, bool tty);

}  // namespace cl::cli

#include "app/cli/terminal_view.h"

#include <unistd.h>

#include <algorithm>

#include "engine/base/errors.h"

namespace cl::cli {

TerminalView::Mode parse_view_mode(const std::string& text, bool tty) {
    if (text == "auto") return tty ? TerminalView::Mode::Live : TerminalView::Mode::Steps;
    if (text == "live") return TerminalView::Mode::Live;
    if (text == "steps") return TerminalView::Mode::Steps;
    if (text == "quiet") return TerminalView::Mode::Quiet;
    throw InputError("--view: expected auto, live, steps or quiet, got '" + text + "'");
}

TerminalView::TerminalView(const trace::RunInfo& info, Mode mode, std::FILE* out)
    : m_info(info),
      m_mode(mode),
      m_out(out),
      m_tty(isatty(fileno(out)) != 0),
      m_text(info.token_text) {}

std::string TerminalView::render(const trace::StepRecord& rec, bool color) const {
    std::string s;
    const bool uniform = m_info.noise_process == "uniform";
    for (int32_t i = m_info.prompt_len; i < rec.seq_len; ++i) {
        const auto state = rec.states[static_cast<size_t>(i)];
        // Uniform noise has no mask: a later block is shown as noise, the active block's tokens
        // (revisable until it ends) as text.
        const bool later_block =
            m_info.block_len > 0 && (i - m_info.prompt_len) / m_info.block_len > rec.block;
        if (state == trace::TokenState::Masked && (!uniform || later_block)) {
            if (uniform)
                s += color ? "\x1b[2m~\x1b[0m" : "~";
            else
                s += color ? "\x1b[2m\xe2\x96\x91\x1b[0m" : "_";  // dim light shade
            continue;
        }
        auto it = m_text.find(rec.tokens[static_cast<size_t>(i)]);
        std::string t = it != m_text.end() ? it->second : "?";
        std::string shown;
        for (char c : t) {
            if (c == '\n')
                shown += color ? "\xe2\x8f\x8e" : "\\n";
            else if (c == '\r' || c == '\t')
                shown += ' ';
            else
                shown += c;
        }
        if (rec.tokens[static_cast<size_t>(i)] == m_info.eos_id)
            shown = color ? "\xe2\x88\x8e" : "<eos>";
        if (state == trace::TokenState::DecodedNow && color)
            s += "\x1b[1;30;42m" + shown + "\x1b[0m";
        else if (state == trace::TokenState::DecodedNow)
            s += "[" + shown + "]";
        else
            s += shown;
    }
    return s;
}

void TerminalView::show(const trace::StepRecord& rec, int32_t planned_steps) {
    for (const auto& [id, t] : rec.new_token_text) m_text[id] = t;
    m_wall_ms += rec.wall_ms;
    if (m_mode == Mode::Quiet) return;
    const int done = rec.step + 1;
    int masked = 0;
    for (auto s : rec.states) masked += (s == trace::TokenState::Masked);
    const int decoded = m_info.gen_len - masked;
    const double tok_s = m_wall_ms > 0 ? decoded / (m_wall_ms / 1000.0) : 0;
    if (m_mode == Mode::Steps || !m_tty) {
        std::fprintf(m_out, "step %3d/%d block %d +%zu  %s\n", done, planned_steps, rec.block,
                     rec.committed.size(), render(rec, false).c_str());
        return;
    }
    // Live: move the cursor back over the previous frame and redraw it.
    for (int i = 0; i < m_lines_drawn; ++i) std::fputs("\x1b[1A\x1b[2K", m_out);
    const int width = 30;
    const int filled = planned_steps > 0 ? std::min(width, width * done / planned_steps) : width;
    std::string bar(static_cast<size_t>(filled), '#');
    bar += std::string(static_cast<size_t>(width - filled), '.');
    const std::string body = render(rec, true);
    std::fprintf(m_out, "%s\n[%s] step %d/%d  block %d  decoded %d/%d  %.1f tok/s  %.1f ms/step\n",
                 body.c_str(), bar.c_str(), done, planned_steps, rec.block, decoded, m_info.gen_len,
                 tok_s, m_wall_ms / done);
    // Count the terminal rows the frame took (wrapped lines included), assuming 100 columns.
    int cols = 0, rows = 1;
    for (unsigned char c : body) {
        if (c == '\x1b') continue;
        if ((c & 0xc0) != 0x80) ++cols;  // count code points
        if (cols >= 100) {
            ++rows;
            cols = 0;
        }
    }
    m_lines_drawn = rows + 1;
    std::fflush(m_out);
}

void TerminalView::finish(const trace::RunSummary& summary) {
    if (m_mode == Mode::Quiet) return;
    std::fprintf(m_out, "%s: %d steps, %d tokens, %.1f ms, %.1f tok/s, recompute %.1f%%\n",
                 trace::to_string(summary.status), summary.steps, summary.generated_tokens,
                 summary.wall_ms, summary.tokens_per_s, 100.0 * summary.recompute_fraction);
}

}  // namespace cl::cli

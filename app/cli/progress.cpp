// ProgressBar (progress.h).
#include "app/cli/progress.h"

#include <unistd.h>

namespace cl::cli {

std::string duration_text(double seconds) {
    const int s = static_cast<int>(seconds);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%dh%02dm%02ds", s / 3600, s / 60 % 60, s % 60);
    return buf;
}

ProgressBar::ProgressBar(std::string unit, size_t total, std::FILE* out)
    : m_unit(std::move(unit)), m_total(total), m_out(out), m_tty(isatty(fileno(out)) != 0) {}

void ProgressBar::update(size_t done, const std::string& note, size_t at_start) {
    using namespace std::chrono;
    const auto now = steady_clock::now();
    const bool last = done >= m_total;
    // Without a terminal: a line when the count changes, but not more than every 5 s (the last
    // count always), so a log of 10,000 items stays readable.
    if (!m_tty && (done == m_last_done || (!last && now - m_last_line < seconds(5)))) return;
    m_last_done = done;
    m_last_line = now;
    const double elapsed = duration<double>(now - m_start).count();
    const size_t ran = done > at_start ? done - at_start : 0;
    const std::string eta = ran ? duration_text(elapsed / static_cast<double>(ran) *
                                                static_cast<double>(m_total - done))
                                : "?";
    constexpr int kWidth = 30;
    const int filled = m_total ? static_cast<int>(kWidth * done / m_total) : kWidth;
    std::fprintf(m_out, "%s[%s%s] %zu/%zu %s  %s elapsed  ETA %s%s%s", m_tty ? "\r" : "",
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), done, m_total,
                 m_unit.c_str(), duration_text(elapsed).c_str(), eta.c_str(),
                 note.empty() ? "" : ("  " + note).c_str(), m_tty ? "\033[K" : "\n");
    std::fflush(m_out);
}

void ProgressBar::clear() {
    if (m_tty) std::fputs("\r\033[K", m_out);
    std::fflush(m_out);
}

void ProgressBar::finish() {
    if (m_tty) std::fputc('\n', m_out);
    std::fflush(m_out);
}

}  // namespace cl::cli

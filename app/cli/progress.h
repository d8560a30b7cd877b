// A progress bar for the long commands (sweep, eval, bench, train): on a terminal one line
// redrawn in place; without one (logs, CI) a plain line when the count changes, at most every
// few seconds, so that a log shows progress without one line per item.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace cl::cli {

// "1h02m03s"
std::string duration_text(double seconds);

class ProgressBar {
public:
    // `unit`: what is counted ("points", "items", "runs"); `out`: stdout or stderr.
    ProgressBar(std::string unit, size_t total, std::FILE* out = stderr);
    // `done` of total so far (`at_start` of them were done before this process started: the ETA
    // counts only what this process did); `note` follows the counts.
    void update(size_t done, const std::string& note = "", size_t at_start = 0);
    // Erases the bar from a terminal so that a table row can take its place (the next update
    // draws it again); nothing without a terminal.
    void clear();
    // Ends the bar's line (the terminal's cursor leaves the redrawn line).
    void finish();

private:
    std::string m_unit;
    size_t m_total;
    std::FILE* m_out;
    bool m_tty;
    std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point m_last_line{};
    size_t m_last_done = static_cast<size_t>(-1);
};

}  // namespace cl::cli

// The desktop app's command line, parsed and checked before any window (or display) exists:
// --help and --version work without a display, and a bad value is an error that names the
// option, not a silently ignored default.
#pragma once

#include <QSize>
#include <QString>
#include <QStringList>
#include <optional>
#include <set>

#include "app/desktop/main_window.h"

namespace cl::app {

struct LaunchArgs {
    LaunchOptions options;
    int advance = 0;       // denoising steps before a headless figure
    int step = -1;         // with --session: the step to show (-1: the last)
    int lesson_step = 0;   // with --lesson: the lesson step to start at
    QString screenshot;    // render the window to this PNG and exit
    QString export_file;   // with --screenshot: also this figure (.png) or metrics (.csv, .json)
    QString export_panel;  // with --export FILE.png: only this panel
    int export_scale = 1;  // with --export FILE.png: pixels per point (2 for print)
    std::set<int> export_columns;  // with --export FILE.png: these columns only (0-based)
    QString sweep_file;            // a sweep results file for the Pareto view
    QSize size{1600, 1000};
    int zoom_first = 0, zoom_count = 0;  // --zoom FIRST,COUNT: the positions the timeline and
                                         // recompute map show (0: all)
    bool headless() const { return !screenshot.isEmpty(); }
};

// What parsing decided: run with `args`, or exit with `exit_code` after `output` (help, version:
// stdout, code 0) or `error` (stderr, code 2).
struct LaunchParse {
    std::optional<LaunchArgs> args;
    int exit_code = 0;
    QString output;
    QString error;
};

// `arguments` is the command line as given (argv[0] first). Needs no QApplication.
LaunchParse parse_launch_args(const QStringList& arguments);

}  // namespace cl::app

// cachelens: the desktop app. Opens on the embedded default model with an example prompt and three
// policies (none, dkv-decode, elastic); Play generates. Headless figures:
//   cachelens --prompt "..." --policies a,b,c --advance N --screenshot out.png
#include <QApplication>
#include <QStatusBar>
#include <QSurfaceFormat>
#include <QTimer>
#include <cstdio>
#include <memory>

#include "app/desktop/imgui_canvas.h"
#include "app/desktop/launch_args.h"
#include "app/desktop/main_window.h"
#include "engine/model/model.h"

namespace {

using cl::app::LaunchArgs;
using cl::app::MainWindow;

int fail(const QString& message) {
    std::fprintf(stderr, "cachelens: %s\n", qPrintable(message));
    return 2;
}

// What the window could not open. A headless figure of a failed load is an error (exit 2); an
// interactive window stays up and says so in its status bar. 0 when everything opened.
int check_loaded(MainWindow& window, const LaunchArgs& a) {
    const auto& o = a.options;
    const QString status = window.statusBar()->currentMessage();
    // The messages name the file already (once).
    if (!window.startup_error().isEmpty()) return fail(window.startup_error());
    if (!o.session.isEmpty() && !window.replaying())
        return fail(status.isEmpty() ? "cannot open session " + o.session : status);
    if (!o.lesson.isEmpty() && !window.in_lesson())
        return fail("cannot start lesson " + o.lesson + ": " + status);
    if (o.session.isEmpty() && o.lesson.isEmpty() && !window.bridge())
        return fail("no model loaded" + (status.isEmpty() ? QString() : ": " + status));
    if (!a.sweep_file.isEmpty()) {
        const QString err = window.open_sweep(a.sweep_file);
        window.statusBar()->showMessage(err);
        if (!err.isEmpty()) return fail(err);
    }
    return 0;
}

// Draws the window once the requested steps exist (at most 60 s), saves it, then the export.
void schedule_screenshot(MainWindow& window, const LaunchArgs& a) {
    const int n = a.advance;
    if (n > 0 && !window.replaying()) window.advance_to(n);
    auto* timer = new QTimer(&window);
    auto waited = std::make_shared<int>(0);
    QObject::connect(timer, &QTimer::timeout, &window, [&window, a, timer, n, waited] {
        auto* bridge = window.bridge();
        const bool ready = window.replaying() || !bridge ||
                           (!bridge->busy() && bridge->max_step() >= n &&
                            window.view().steps_available >= std::min(n, bridge->max_step()));
        if (!ready && ++*waited < 1200) return;
        timer->stop();
        window.canvas()->update();
        QTimer::singleShot(400, &window, [&window, a] {
            window.canvas()->update();
            QApplication::processEvents();
            QString err = window.grab().save(a.screenshot) ? "" : a.screenshot + ": cannot write";
            if (err.isEmpty() && !a.export_file.isEmpty())
                err = window.export_to(a.export_file, a.export_panel, a.export_scale,
                                       a.export_columns);
            if (err.isEmpty()) std::printf("wrote %s\n", qPrintable(a.screenshot));
            QApplication::exit(err.isEmpty() ? 0 : fail(err));
        });
    });
    timer->start(50);
}

}  // namespace

int main(int argc, char** argv) {
    // QApplication consumes X11 session-management arguments ("-session ID"), which would swallow
    // our --session FILE: parse the command line as given, before any display is opened.
    QStringList arguments;
    for (int i = 0; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);
    const auto parsed = cl::app::parse_launch_args(arguments);
    if (!parsed.args) {
        if (!parsed.error.isEmpty()) return fail(parsed.error);
        std::fputs(qPrintable(parsed.output), stdout);
        return parsed.exit_code;
    }
    const LaunchArgs& a = *parsed.args;

    // Before Qt starts its threads: the choice may set OPENBLAS_CORETYPE (setenv), which another
    // thread's getenv must not race.
    cl::choose_blas_kernels();
    QSurfaceFormat fmt;
    fmt.setVersion(3, 3);
    fmt.setProfile(QSurfaceFormat::CoreProfile);
    QSurfaceFormat::setDefaultFormat(fmt);
    QApplication app(argc, argv);
    QApplication::setOrganizationName("CacheLens");
    QApplication::setApplicationName("cachelens");
    QApplication::setApplicationVersion(CL_VERSION);
    cl::set_thread_count(a.options.threads);

    MainWindow window(a.options);
    if (const int rc = check_loaded(window, a); rc != 0 && a.headless()) return rc;
    if (window.replaying() && a.step >= 0) window.set_step(a.step);
    window.view().zoom_first = a.zoom_first;
    window.view().zoom_count = a.zoom_count;
    for (int k = a.lesson_step; k > 0 && window.in_lesson(); --k) window.lesson_next();
    window.resize(a.size);
    window.show();
    if (a.headless()) schedule_screenshot(window, a);
    return app.exec();
}

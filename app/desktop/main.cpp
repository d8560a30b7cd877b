// cachelens: the desktop app. Opens on the embedded default model with an example prompt and three
// policies (none, dkv-decode, elastic); Play generates. Headless figures:
//   cachelens --prompt "..." --policies a,b,c --advance N --screenshot out.png
#include <QApplication>
#include <QCommandLineParser>
#include <QStatusBar>
#include <QSurfaceFormat>
#include <QTimer>
#include <cstdio>

#include "app/desktop/imgui_canvas.h"
#include "app/desktop/main_window.h"
#include "engine/model/model.h"
#include "viz/panels/panels.h"

namespace {

// --sweep FILE: the Pareto view; false when a headless figure cannot have it (exit code 2).
bool open_sweep(cl::app::MainWindow& window, const QString& file, bool headless) {
    const QString err = window.open_sweep(file);
    if (err.isEmpty()) return true;
    std::fprintf(stderr, "cachelens: %s\n", qPrintable(err));
    window.statusBar()->showMessage(err);
    return !headless;
}

}  // namespace

int main(int argc, char** argv) {
    QSurfaceFormat fmt;
    fmt.setVersion(3, 3);
    fmt.setProfile(QSurfaceFormat::CoreProfile);
    QSurfaceFormat::setDefaultFormat(fmt);
    // QApplication consumes X11 session-management arguments ("-session ID"), which would swallow
    // our
    // --session FILE: keep the command line as given and parse that copy.
    QStringList arguments;
    for (int i = 0; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);
    QApplication app(argc, argv);
    QApplication::setOrganizationName("CacheLens");
    QApplication::setApplicationName("cachelens");
    QApplication::setApplicationVersion(CL_VERSION);

    QCommandLineParser parser;
    parser.setApplicationDescription(
        "CacheLens: KV/feature caching in diffusion LLMs, live and side by side");
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption model({"m", "model"}, "Model folder (default: the embedded model)", "DIR");
    QCommandLineOption prompt("prompt", "Prompt text", "TEXT");
    QCommandLineOption policies("policies", "Comma-separated policies to show", "LIST");
    QCommandLineOption advance("advance", "Run N denoising steps before showing (headless figures)",
                               "N");
    QCommandLineOption screenshot("screenshot", "Render the window to a PNG and exit", "OUT.png");
    QCommandLineOption threads("threads", "CPU threads for the engine", "N", "1");
    QCommandLineOption light("light", "Light theme");
    QCommandLineOption size("size", "Window size WxH", "WxH", "1600x1000");
    QCommandLineOption session("session", "Replay a saved session (no model needed)", "FILE");
    QCommandLineOption step("step", "With --session: show this step", "N");
    QCommandLineOption no_record("no-record", "Do not record live runs into the session folder");
    QCommandLineOption sweep_file("sweep", "Show a sweep results file's Pareto view", "FILE");
    QString panel_list;
    for (const auto& name : cl::viz::panel_names())
        panel_list += (panel_list.isEmpty() ? "" : ", ") + QString::fromStdString(name);
    QCommandLineOption export_panel(
        "export-panel", "With --export FILE.png: only this panel (" + panel_list + ")", "NAME");
    QCommandLineOption lesson("lesson", "Start a lesson (a .lesson.json file)", "FILE");
    QCommandLineOption lesson_step("lesson-step", "With --lesson: go to this lesson step (0-based)",
                                   "K");
    QCommandLineOption export_file(
        "export",
        "With --screenshot: also export the canvas figure (.png) or per-step metrics (.csv, .json)",
        "FILE");
    parser.addOptions({model, prompt, policies, advance, screenshot, threads, light, size, session,
                       step, no_record, export_file, lesson, lesson_step, export_panel,
                       sweep_file});
    parser.process(arguments);

    cl::app::LaunchOptions o;
    o.model_dir = parser.value(model);
    o.prompt = parser.value(prompt);
    if (parser.isSet(policies)) o.policies = parser.value(policies).split(',', Qt::SkipEmptyParts);
    o.threads = std::max(1, parser.value(threads).toInt());
    o.light = parser.isSet(light);
    o.session = parser.value(session);
    o.lesson = parser.value(lesson);
    o.record = !parser.isSet(no_record) && !parser.isSet(screenshot);
    cl::set_thread_count(o.threads);

    cl::app::MainWindow window(o);
    if (!o.session.isEmpty() && !window.replaying()) {
        // The window stays usable, but a headless figure of a bad file is an error.
        if (parser.isSet(screenshot)) {
            std::fprintf(stderr, "cachelens: cannot open session %s: %s\n", qPrintable(o.session),
                         qPrintable(window.statusBar()->currentMessage()));
            return 2;
        }
    }
    if (parser.isSet(sweep_file) &&
        !open_sweep(window, parser.value(sweep_file), parser.isSet(screenshot)))
        return 2;
    if (window.replaying() && parser.isSet(step)) window.view().step = parser.value(step).toInt();
    if (window.in_lesson())
        for (int k = parser.value(lesson_step).toInt(); k > 0; --k) window.lesson_next();
    if (!o.lesson.isEmpty() && !window.in_lesson() && parser.isSet(screenshot)) {
        std::fprintf(stderr, "cachelens: cannot start lesson %s: %s\n", qPrintable(o.lesson),
                     qPrintable(window.statusBar()->currentMessage()));
        return 2;
    }
    const auto wh = parser.value(size).split('x');
    if (wh.size() == 2) window.resize(wh[0].toInt(), wh[1].toInt());
    window.show();

    if (parser.isSet(screenshot)) {
        const int n = parser.value(advance).toInt();
        const QString out = parser.value(screenshot);
        if (n > 0 && !window.replaying()) window.advance_to(n);
        auto* timer = new QTimer(&window);
        auto waited = std::make_shared<int>(0);
        QObject::connect(timer, &QTimer::timeout, &window, [&, timer, n, out, waited] {
            auto* bridge = window.bridge();
            const bool ready = window.replaying() || !bridge ||
                               (!bridge->busy() && bridge->max_step() >= std::min(n, 1 << 30) &&
                                static_cast<int>(window.view().steps_available) >=
                                    std::min(n, bridge->max_step()));
            if (!ready && ++*waited < 1200) return;  // at most 60 s
            timer->stop();
            window.canvas()->update();
            QTimer::singleShot(400, &window, [&, out] {
                window.canvas()->update();
                QApplication::processEvents();
                bool ok = window.grab().save(out);
                if (ok && parser.isSet(export_file)) {
                    const QString err =
                        window.export_to(parser.value(export_file), parser.value(export_panel));
                    if (!err.isEmpty()) std::fprintf(stderr, "cachelens: %s\n", qPrintable(err));
                    ok = err.isEmpty();
                }
                std::fprintf(ok ? stdout : stderr,
                             ok ? "wrote %s\n" : "cachelens: cannot write %s\n", qPrintable(out));
                QApplication::exit(ok ? 0 : 1);
            });
        });
        timer->start(50);
    }
    return app.exec();
}

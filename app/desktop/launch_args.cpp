// Parsing and checking the desktop app's command line (launch_args.h).
#include "app/desktop/launch_args.h"

#include <tuple>

#include <QCommandLineParser>
#include <stdexcept>

#include "engine/generation/policy_registry.h"
#include "viz/panels/panels.h"

namespace cl::app {
namespace {

// A bad option value: the message names the option and says what it accepts.
struct BadValue : std::runtime_error {
    using std::runtime_error::runtime_error;
};

int integer_value(const QCommandLineParser& parser, const QString& name, int lo, int hi,
                  int fallback) {
    if (!parser.isSet(name)) return fallback;
    bool ok = false;
    const int v = parser.value(name).toInt(&ok);
    if (!ok || v < lo || v > hi)
        throw BadValue(QString("--%1 %2: expected a whole number from %3 to %4")
                           .arg(name, parser.value(name))
                           .arg(lo)
                           .arg(hi)
                           .toStdString());
    return v;
}

// --zoom FIRST,COUNT: COUNT positions from FIRST (at least 16).
std::pair<int, int> zoom_value(const QCommandLineParser& parser) {
    if (!parser.isSet("zoom")) return {0, 0};
    const auto parts = parser.value("zoom").split(',');
    bool ok_first = false, ok_count = false;
    const int first = parts.size() == 2 ? parts[0].toInt(&ok_first) : -1;
    const int count = parts.size() == 2 ? parts[1].toInt(&ok_count) : 0;
    if (!ok_first || !ok_count || first < 0 || count < 16 || first > (1 << 20) || count > (1 << 20))
        throw BadValue(("--zoom " + parser.value("zoom") +
                        ": expected FIRST,COUNT (COUNT positions from FIRST, at least 16), "
                        "e.g. 600,128")
                           .toStdString());
    return {first, count};
}

QSize size_value(const QCommandLineParser& parser) {
    const QString text = parser.value("size");
    const auto wh = text.split('x');
    bool ok_w = false, ok_h = false;
    const int w = wh.size() == 2 ? wh[0].toInt(&ok_w) : 0;
    const int h = wh.size() == 2 ? wh[1].toInt(&ok_h) : 0;
    if (!ok_w || !ok_h || w < 320 || h < 240 || w > 16384 || h > 16384)
        throw BadValue(
            ("--size " + text + ": expected WxH from 320x240 to 16384x16384, e.g. 1280x720")
                .toStdString());
    return {w, h};
}

QStringList policy_list(const QCommandLineParser& parser) {
    if (!parser.isSet("policies")) return {};
    const QStringList names = parser.value("policies").split(',', Qt::SkipEmptyParts);
    if (names.isEmpty()) throw BadValue("--policies: name at least one policy");
    for (const auto& name : names)
        if (!find_policy(name.trimmed().toStdString())) {
            QStringList known;
            for (const auto& info : list_policies()) known << QString::fromStdString(info.name);
            throw BadValue(
                ("--policies: unknown policy '" + name + "' (known: " + known.join(", ") + ")")
                    .toStdString());
        }
    QStringList out;
    for (const auto& name : names) out << name.trimmed();
    return out;
}

QString panel_value(const QCommandLineParser& parser) {
    const QString panel = parser.value("export-panel");
    if (panel.isEmpty()) return panel;
    QStringList known;
    for (const auto& name : viz::panel_names()) known << QString::fromStdString(name);
    if (!known.contains(panel))
        throw BadValue(
            ("--export-panel " + panel + ": unknown panel (known: " + known.join(", ") + ")")
                .toStdString());
    if (!parser.value("export").endsWith(".png", Qt::CaseInsensitive))
        throw BadValue("--export-panel needs --export FILE.png");
    return panel;
}

// --export-columns 1,3: 1-based on the command line (as the lessons count), 0-based inside.
std::set<int> columns_value(const QCommandLineParser& parser) {
    std::set<int> out;
    if (!parser.isSet("export-columns")) return out;
    for (const auto& part : parser.value("export-columns").split(',')) {
        bool ok = false;
        const int k = part.trimmed().toInt(&ok);
        if (!ok || k < 1 || k > 64)
            throw BadValue(("--export-columns " + parser.value("export-columns") +
                            ": expected column numbers from 1, e.g. 1,3")
                               .toStdString());
        out.insert(k - 1);
    }
    return out;
}

void add_options(QCommandLineParser& parser) {
    parser.setApplicationDescription(
        "CacheLens: KV/feature caching in diffusion LLMs, live and side by side");
    QString panels;
    for (const auto& name : viz::panel_names())
        panels += (panels.isEmpty() ? "" : ", ") + QString::fromStdString(name);
    parser.addOptions({
        {{"h", "help"}, "Show this help and exit"},
        {{"v", "version"}, "Show the version and exit"},
        {{"m", "model"}, "Model folder (default: the embedded model)", "DIR"},
        {"also-model", "A second model folder: every policy also runs on it, side by side", "DIR"},
        {"prompt", "Prompt text", "TEXT"},
        {"policies", "Comma-separated policies to show (cachelens-cli policies)", "LIST"},
        {"advance", "Run N denoising steps before showing (headless figures)", "N"},
        {"screenshot", "Render the window to a PNG and exit", "OUT.png"},
        {"threads", "CPU threads for the engine", "N", "1"},
        {"attention-budget",
         "MB a run's head-mean attention maps may take; past it they are pooled into tiles "
         "(default 256)",
         "MB"},
        {"light", "Light theme"},
        {"presenter", "Presenter mode: the canvas gets the window (F11 toggles)"},
        {"size", "Window size WxH", "WxH", "1600x1000"},
        {"zoom", "The positions the timeline and recompute map show: COUNT from FIRST",
         "FIRST,COUNT"},
        {"session", "Replay a saved session (no model needed)", "FILE"},
        {"step", "With --session: show this step (0-based)", "N"},
        {"no-record", "Do not record live runs into the session folder"},
        {"sweep", "Show a sweep results file's Pareto view", "FILE"},
        {"export",
         "With --screenshot: also export the canvas figure (.png) or per-step "
         "metrics (.csv, .json)",
         "FILE"},
        {"export-panel", "With --export FILE.png: only this panel (" + panels + ")", "NAME"},
        {"export-scale", "With --export FILE.png: pixels per point, 1-4 (2 for print)", "N", "1"},
        {"export-columns", "With --export FILE.png: only these columns, from 1 (e.g. 1,3)", "LIST"},
        {"lesson", "Start a lesson (a .lesson.json file)", "FILE"},
        {"lesson-step", "With --lesson: go to this lesson step (0-based)", "K"},
    });
}

LaunchArgs read_args(const QCommandLineParser& parser) {
    LaunchArgs a;
    LaunchOptions& o = a.options;
    o.model_dir = parser.value("model");
    o.also_model_dir = parser.value("also-model");
    o.prompt = parser.value("prompt");
    o.policies = policy_list(parser);
    o.threads = integer_value(parser, "threads", 1, 256, 1);
    o.attention_budget_mb = integer_value(parser, "attention-budget", 1, 100000, 0);
    o.light = parser.isSet("light");
    o.presenter = parser.isSet("presenter");
    o.session = parser.value("session");
    o.lesson = parser.value("lesson");
    a.screenshot = parser.value("screenshot");
    o.record = !parser.isSet("no-record") && a.screenshot.isEmpty();
    if (a.headless()) o.background_load_bytes = -1;  // a figure needs its model before it draws
    a.advance = integer_value(parser, "advance", 0, 1 << 20, 0);
    a.step = integer_value(parser, "step", 0, 1 << 20, -1);
    a.lesson_step = integer_value(parser, "lesson-step", 0, 1000, 0);
    a.export_file = parser.value("export");
    a.export_panel = panel_value(parser);
    a.export_scale = integer_value(parser, "export-scale", 1, 4, 1);
    a.export_columns = columns_value(parser);
    if ((parser.isSet("export-scale") || parser.isSet("export-columns")) &&
        !a.export_file.endsWith(".png", Qt::CaseInsensitive))
        throw BadValue("--export-scale and --export-columns need --export FILE.png");
    a.sweep_file = parser.value("sweep");
    a.size = size_value(parser);
    std::tie(a.zoom_first, a.zoom_count) = zoom_value(parser);
    if (!a.export_file.isEmpty() && a.screenshot.isEmpty())
        throw BadValue("--export needs --screenshot OUT.png (the window is drawn first)");
    if (a.step >= 0 && o.session.isEmpty()) throw BadValue("--step needs --session FILE");
    return a;
}

}  // namespace

LaunchParse parse_launch_args(const QStringList& arguments) {
    QCommandLineParser parser;
    add_options(parser);
    LaunchParse out;
    if (!parser.parse(arguments)) {
        out.exit_code = 2;
        out.error = parser.errorText() + " (cachelens --help lists the options)";
        return out;
    }
    if (parser.isSet("help")) {
        out.output = parser.helpText().replace("<executable_name>", "cachelens");
        return out;
    }
    if (parser.isSet("version")) {
        out.output = QString("cachelens %1\n").arg(CL_VERSION);
        return out;
    }
    if (!parser.positionalArguments().isEmpty()) {
        out.exit_code = 2;
        out.error = "unexpected argument '" + parser.positionalArguments().first() +
                    "' (cachelens --help lists the options)";
        return out;
    }
    try {
        out.args = read_args(parser);
    } catch (const BadValue& e) {
        out.exit_code = 2;
        out.error = QString::fromStdString(e.what());
    }
    return out;
}

}  // namespace cl::app

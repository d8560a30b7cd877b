#include "app/desktop/main_window.h"
#include "engine/base/assets.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QShortcut>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyleFactory>
#include <QTimer>
#include <QVBoxLayout>
#include <sstream>

#include "app/desktop/export.h"
#include "app/desktop/imgui_canvas.h"
#include "app/desktop/session_browser.h"
#include "engine/base/errors.h"
#include "engine/generation/policy_registry.h"
#include "engine/kernels/kernel_choice.h"
#include "sessions/session_reader.h"

namespace cl::app {

namespace {

// The Kernels setting at launch: CACHELENS_KERNELS where it is set (the tests' switch), else the
// remembered one. A bad value of the variable is named in the status bar and the runs take fast.
QString initial_kernel_set(const QSettings& settings, QString* problem) {
    if (!qEnvironmentVariableIsEmpty(kKernelsEnvironment)) {
        try {
            return kernel_set_name(kernel_set());
        } catch (const InputError& e) {
            *problem = e.what();
            set_kernel_set(KernelSet::Fast);  // what the runs take, so nothing asks again
            return kernel_set_name(KernelSet::Fast);
        }
    }
    const QString saved = settings.value("kernels").toString();
    return kernel_set_named(saved.toStdString()) ? saved : kernel_set_name(KernelSet::Fast);
}

}  // namespace

MainWindow::MainWindow(const LaunchOptions& options, QWidget* parent)
    : QMainWindow(parent),
      m_threads(options.threads),
      m_background_load_bytes(options.background_load_bytes) {
    setWindowTitle("CacheLens");
    QSettings settings;
    m_canvas = new ImGuiCanvas(this);
    setCentralWidget(m_canvas);

    build_docks();
    build_menus();

    // Settings (remembered between launches); command-line options win.
    m_prompt->setPlainText(options.prompt.isEmpty()
                               ? settings.value("prompt", example_prompts().front()).toString()
                               : options.prompt);
    QStringList policies = options.policies;
    if (policies.isEmpty())
        policies =
            settings.value("policies", QStringList{"none", "dkv-decode", "elastic"}).toStringList();
    for (auto& [name, w] : m_policy_widgets)
        w.enabled->setChecked(policies.contains(QString::fromStdString(name)));
    m_gen_length->setValue(settings.value("gen_length", m_gen_length->value()).toInt());
    m_block_length->setValue(settings.value("block_length", m_block_length->value()).toInt());
    m_steps->setValue(settings.value("steps", m_steps->value()).toInt());
    m_attention_budget->setValue(
        options.attention_budget_mb > 0
            ? options.attention_budget_mb
            : settings.value("attention_budget_mb", m_attention_budget->value()).toDouble());
    QString kernels_problem;
    m_kernels->setCurrentText(initial_kernel_set(settings, &kernels_problem));
    restoreGeometry(settings.value("geometry").toByteArray());
    m_canvas->set_font_scale(settings.value("font_scale", 1.0).toDouble());
    set_theme(!options.light && settings.value("dark", true).toBool());

    m_canvas->set_draw([this] {
        viz::CanvasOptions options;
        if (source()) options.sweeps = &source()->accuracy_sweeps();
        if (m_pareto) {
            options.pareto = &*m_pareto;
            options.pareto_clicked = &m_pareto_clicked;
        }
        viz::draw_canvas(current_runs(), m_view, *m_canvas, options);
        if (m_pareto_clicked >= 0) {
            const int clicked = m_pareto_clicked;
            m_pareto_clicked = -1;
            QTimer::singleShot(0, this, [this, clicked] { run_pareto_point(clicked); });
        }
        if (m_view.seek_request >= 0) {
            const int step = m_view.seek_request;
            m_view.seek_request = -1;
            QTimer::singleShot(0, this, [this, step] { set_step(step); });
        }
    });
    open_at_start(options, settings);
    if (options.presenter) set_presenter(true);
    refresh_recording_label();
    if (!kernels_problem.isEmpty()) statusBar()->showMessage(kernels_problem + " (fast taken)");
    m_poll = new QTimer(this);
    connect(m_poll, &QTimer::timeout, this, [this] {
        if (!source()) return;
        const auto g = source()->generation();
        if (g != m_seen_generation) {
            m_seen_generation = g;
            m_canvas->update();
            refresh_transport();
        }
    });
    m_poll->start(33);
}

// Run setup and Sessions (tabbed, left), Policies (right), Transport (bottom, fixed).
void MainWindow::build_docks() {
    auto* setup_dock = new QDockWidget("Run setup", this);
    setup_dock->setObjectName("setup");
    setup_dock->setWidget(build_setup_dock());
    addDockWidget(Qt::LeftDockWidgetArea, setup_dock);
    auto* policies_dock = new QDockWidget("Policies", this);
    policies_dock->setObjectName("policies");
    policies_dock->setWidget(build_policies_dock());
    addDockWidget(Qt::RightDockWidgetArea, policies_dock);
    auto* transport_dock = new QDockWidget("Transport", this);
    transport_dock->setObjectName("transport");
    transport_dock->setWidget(build_transport());
    transport_dock->setFeatures(QDockWidget::NoDockWidgetFeatures);
    transport_dock->setTitleBarWidget(new QWidget());
    addDockWidget(Qt::BottomDockWidgetArea, transport_dock);
    auto* browser_dock = new QDockWidget("Sessions", this);
    browser_dock->setObjectName("sessions");
    m_browser = new SessionBrowser();
    m_browser->on_open = [this](const QString& path, int64_t comparison) {
        return open_session(path, true, comparison);
    };
    browser_dock->setWidget(m_browser);
    addDockWidget(Qt::LeftDockWidgetArea, browser_dock);
    tabifyDockWidget(setup_dock, browser_dock);
    setup_dock->raise();
    connect(browser_dock, &QDockWidget::visibilityChanged, this, [this](bool visible) {
        // Shown: list the folder it shows (the sessions folder until set), refreshed.
        if (!visible) return;
        if (m_browser->folder().isEmpty())
            m_browser->set_folder(default_session_dir());
        else
            m_browser->refresh();
    });
}

MainWindow::~MainWindow() {
    cancel_background_load();
    m_replay.reset();
    m_live.reset();  // stops the engine thread before the widgets it feeds go
}

RunSource* MainWindow::source() {
    return m_replay ? static_cast<RunSource*>(m_replay.get()) : m_live.get();
}

const RunSource* MainWindow::source() const {
    return m_replay ? static_cast<const RunSource*>(m_replay.get()) : m_live.get();
}

void MainWindow::closeEvent(QCloseEvent* e) {
    save_settings();
    QMainWindow::closeEvent(e);
}

void MainWindow::save_settings() const {
    QSettings s;
    s.setValue("prompt", m_prompt->toPlainText());
    QStringList policies;
    for (const auto& [name, w] : m_policy_widgets)
        if (w.enabled->isChecked()) policies << QString::fromStdString(name);
    s.setValue("policies", policies);
    s.setValue("gen_length", m_gen_length->value());
    s.setValue("block_length", m_block_length->value());
    s.setValue("attention_budget_mb", m_attention_budget->value());
    s.setValue("kernels", m_kernels->currentText());
    s.setValue("steps", m_steps->value());
    if (m_model)
        s.setValue(
            "model_dir",
            QFileInfo(QString::fromStdString(m_model->directory().string())).absoluteFilePath());
    s.setValue("dark", m_view.dark);
    s.setValue("geometry", saveGeometry());
}

QString MainWindow::default_session_dir() {
    return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/sessions";
}

std::vector<viz::RunView>& MainWindow::current_runs() {
    m_no_runs.clear();  // no model and no replay: an empty canvas
    return source() ? source()->runs(m_view) : m_no_runs;
}

void MainWindow::set_engine_controls_enabled(bool on, const QString& why) {
    // The reason is appended after " \u2014 " and removed again, so a tooltip never stacks two.
    const QString separator = " \u2014 ";
    for (auto* w : m_engine_controls) {
        const QString base = w->toolTip().section(separator, 0, 0);
        w->setEnabled(on);
        w->setToolTip(on ? base : base + separator + why);
    }
}

// The engine's controls when no replay is shown: usable with a model, else disabled saying so.
void MainWindow::enable_live_controls() {
    if (m_live)
        set_engine_controls_enabled(true);
    else
        set_engine_controls_enabled(false, "no model is loaded (File > Open model folder)");
}

void MainWindow::back_to_live() {
    if (in_lesson()) end_lesson();  // its banner and Space-advance belong to the replay
    m_replay.reset();
    enable_live_controls();
    show_replay_setup(false);
    setWindowTitle("CacheLens");
    set_step(-1);
}

void MainWindow::show_replay_setup(bool replaying) {
    m_setup_form->setEnabled(!replaying);
    m_replay_setup->setVisible(replaying);
    fill_replay_comparisons();
    if (!replaying || !m_replay) return;
    const auto& runs = m_replay->runs(m_view);
    if (runs.empty()) return;
    const auto& info = runs.front().info;
    QString columns;
    for (const auto& r : runs)
        columns += (columns.isEmpty() ? "" : ", ") + QString::fromStdString(r.info.policy);
    m_replay_setup->setText(
        QString("<b>Replay</b> (read-only; File &gt; Back to live engine returns)<br>"
                "model %1 on %2<br>G = %3, block %4, %5 steps, seed %6<br>columns: %7<br>"
                "prompt: %8")
            .arg(QString::fromStdString(info.model_name + " (" + info.architecture + ")")
                     .toHtmlEscaped(),
                 QString::fromStdString(info.device + ", " + info.dtype + ", " + info.kernels +
                                        " kernels")
                     .toHtmlEscaped())
            .arg(info.gen_len)
            .arg(info.block_len)
            .arg(info.steps)
            .arg(info.seed)
            .arg(columns.toHtmlEscaped(),
                 QString::fromStdString(info.prompt_text).toHtmlEscaped()));
}

// The replayed file's comparisons, newest first, the shown one selected; hidden when there is
// only one (or no replay).
void MainWindow::fill_replay_comparisons() {
    const QSignalBlocker block(m_replay_comparisons);
    m_replay_comparisons->clear();
    const size_t n = m_replay ? m_replay->comparisons().size() : 0;
    m_replay_comparisons->setVisible(n > 1);
    for (size_t k = n; k-- > 0;) {
        const auto& c = m_replay->comparisons()[k];
        m_replay_comparisons->addItem(QString("comparison %1 of %2 \u2014 %3, %4 runs")
                                          .arg(k + 1)
                                          .arg(n)
                                          .arg(QString::fromStdString(c.created_utc))
                                          .arg(c.run_ids.size()),
                                      QVariant::fromValue<qlonglong>(c.comparison_id));
        if (c.comparison_id == m_replay->comparison_id())
            m_replay_comparisons->setCurrentIndex(m_replay_comparisons->count() - 1);
    }
}

QString MainWindow::open_session(const QString& path, bool repair, int64_t comparison_id) {
    try {
        auto replay = ReplaySource::open(path.toStdString(), repair, comparison_id);
        if (m_live) m_live->set_playing(false);
        m_replay = std::move(replay);
        m_replay_repair = repair;
        m_view.step = -1;
        set_engine_controls_enabled(false, "replay of a saved session: the engine is not running");
        show_replay_setup(true);
        setWindowTitle("CacheLens \u2014 replay: " + QFileInfo(path).fileName());
        statusBar()->showMessage(
            QString("Replaying %1 (comparison %2 of %3, %4 runs); File > Back to live engine "
                    "returns.")
                .arg(path)
                .arg(m_replay_comparisons->currentIndex() + 1)
                .arg(m_replay->comparisons().size())
                .arg(m_replay->run_count()));
        m_canvas->update();
        refresh_transport();
        return "";
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
}

namespace {
// A panel export keeps only the rectangle its panels covered (plus a margin), not the empty rest
// of the canvas. `extent` is in logical pixels; the image is in device pixels.
QImage crop_to_figure(const QImage& img, const ImVec4& extent, double pixel_ratio) {
    if (extent.z <= extent.x || extent.w <= extent.y) return img;
    constexpr double kMargin = 8;
    const QRect r(QPoint(static_cast<int>((extent.x - kMargin) * pixel_ratio),
                         static_cast<int>((extent.y - kMargin) * pixel_ratio)),
                  QPoint(static_cast<int>((extent.z + kMargin) * pixel_ratio),
                         static_cast<int>((extent.w + kMargin) * pixel_ratio)));
    return img.copy(r.intersected(img.rect()));
}
}  // namespace

QString MainWindow::export_to(const QString& path, const QString& panel, int scale,
                              const std::set<int>& columns) {
    const auto runs = current_runs();
    if (path.endsWith(".csv", Qt::CaseInsensitive))
        return QString::fromStdString(export_metrics_csv(runs, path.toStdString()));
    if (path.endsWith(".json", Qt::CaseInsensitive))
        return QString::fromStdString(export_metrics_json(runs, path.toStdString()));
    if (!path.endsWith(".png", Qt::CaseInsensitive))
        return path + ": choose a .png, .csv or .json file";
    // Figure mode: the canvas without its controls, at the widget's full device resolution; at
    // scale N the canvas is drawn N times larger with N times larger text (the same layout).
    m_view.figure_mode = true;
    m_view.figure_panel = panel.toStdString();
    m_view.figure_columns = columns;
    const QSize size = m_canvas->size();
    const double font_scale = m_canvas->font_scale();
    if (scale > 1) {
        m_canvas->set_font_scale(font_scale * scale);
        m_canvas->resize(size * scale);
    }
    QImage img = m_canvas->grabFramebuffer();
    if (!panel.isEmpty()) img = crop_to_figure(img, m_view.figure_extent, devicePixelRatioF());
    if (scale > 1) {
        m_canvas->set_font_scale(font_scale);
        m_canvas->resize(size);
    }
    m_view.figure_mode = false;
    m_view.figure_panel.clear();
    m_view.figure_columns.clear();
    m_canvas->update();
    return img.save(path) ? "" : path + ": cannot write the PNG";
}

QString MainWindow::save_session(const QString& path) {
    std::string error;
    const std::string file = source() ? source()->session_file(error) : "";
    if (file.empty()) return "Nothing to save: recording is off.";
    if (!error.empty()) return QString::fromStdString(error);
    try {
        sessions::SessionReader::open(file)->copy_to(path.toStdString());
        return "";
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
}

void MainWindow::apply_setup() {
    if (!bridge()) return;
    RunSetup setup;
    setup.prompt = m_prompt->toPlainText().toStdString();
    setup.chat_template = m_chat_template->isChecked();
    setup.config.gen_length = m_gen_length->value();
    setup.config.block_length = m_block_length->value();
    setup.config.steps = m_steps->value();
    setup.config.fresh_prefix = m_fresh_prefix->value();
    setup.config.remasking = parse_remasking(m_remasking->currentText().toStdString());
    setup.config.schedule = parse_transfer_schedule(m_schedule->currentText().toStdString());
    setup.config.top_p = m_top_p->value();
    setup.config.top_k = m_top_k->value();
    setup.config.alg_temp = m_alg_temp->value();
    setup.config.threshold = m_threshold->value();
    setup.config.temperature = m_temperature->value();
    setup.config.cfg_scale = m_cfg->value();
    setup.config.seed = static_cast<uint64_t>(m_seed->value());
    setup.oracle = m_oracle->isChecked();
    setup.drift = m_drift->isChecked();
    setup.attention_budget = m_attention_budget->value() * 1e6;
    setup.kernels =
        kernel_set_named(m_kernels->currentText().toStdString()).value_or(KernelSet::Fast);
    for (const auto& item : m_full_attention_layers->text().split(',', Qt::SkipEmptyParts)) {
        bool ok = false;
        const int layer = item.trimmed().toInt(&ok);
        if (!ok || layer < 0 || layer >= m_model->config().n_layers) {
            statusBar()->showMessage(QString("Not started: full-resolution layers: '%1' is not a "
                                             "layer of this model (0..%2)")
                                         .arg(item.trimmed())
                                         .arg(m_model->config().n_layers - 1),
                                     8000);
            return;
        }
        setup.full_attention_layers.insert(layer);
    }
    setup.columns = selected_columns();
    try {
        setup.config.validate(m_model->config().max_sequence_length, 0);
        if (m_also_model) setup.config.validate(m_also_model->config().max_sequence_length, 0);
    } catch (const InputError& e) {
        statusBar()->showMessage(QString("Not started: %1").arg(e.what()), 8000);
        return;
    }
    m_column_policies.clear();
    for (const auto& c : setup.columns) m_column_policies.push_back(c.policy);
    m_view.step = -1;
    bridge()->configure(setup);
    statusBar()->showMessage("Ready: press Play (Space) or step (Right).", 4000);
    refresh_transport();
}

void MainWindow::set_theme(bool dark) {
    m_view.dark = dark;
    qApp->setStyle(QStyleFactory::create("Fusion"));
    QPalette p;
    if (dark) {
        p.setColor(QPalette::Window, QColor(37, 37, 42));
        p.setColor(QPalette::WindowText, QColor(230, 230, 235));
        p.setColor(QPalette::Base, QColor(25, 25, 30));
        p.setColor(QPalette::AlternateBase, QColor(45, 45, 50));
        p.setColor(QPalette::Text, QColor(230, 230, 235));
        p.setColor(QPalette::Button, QColor(50, 50, 56));
        p.setColor(QPalette::ButtonText, QColor(230, 230, 235));
        p.setColor(QPalette::Highlight, QColor(0, 114, 178));
        p.setColor(QPalette::HighlightedText, Qt::white);
        p.setColor(QPalette::ToolTipBase, QColor(50, 50, 56));
        p.setColor(QPalette::ToolTipText, QColor(230, 230, 235));
        p.setColor(QPalette::Disabled, QPalette::Text, QColor(120, 120, 125));
        p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(120, 120, 125));
    } else {
        p = qApp->style()->standardPalette();
    }
    qApp->setPalette(p);
    m_canvas->set_dark(dark);
}

}  // namespace cl::app

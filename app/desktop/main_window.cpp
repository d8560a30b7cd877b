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
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QShortcut>
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
#include "sessions/session_reader.h"

namespace cl::app {

namespace {

// One line of meaning, the paper's value and, for a choice, what each value means.
std::string param_tooltip(const ParamSpec& spec) {
    std::ostringstream out;
    out << spec.help << " (" << to_string(spec.type) << ", paper default " << spec.paper_default
        << ")";
    for (size_t i = 0; i < spec.choices.size(); ++i) out << "\n" << i << " = " << spec.choices[i];
    return out.str();
}

const char* kExamples[] = {
    "What is 047 + 385?",
    "Remember: king=417, house=902, sea=338, fire=561, land=204, city=719, sword=853, hand=126. "
    "What is house?",
    "Reverse the list: 1 7 9 4 5 6",
    "Continue: In the beginning God created",
};

QString first_example() {
    return kExamples[0];
}

}  // namespace

MainWindow::MainWindow(const LaunchOptions& options, QWidget* parent)
    : QMainWindow(parent), m_threads(options.threads) {
    setWindowTitle("CacheLens");
    QSettings settings;
    m_canvas = new ImGuiCanvas(this);
    setCentralWidget(m_canvas);

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
    m_browser->on_open = [this](const QString& path) { return open_session(path); };
    browser_dock->setWidget(m_browser);
    addDockWidget(Qt::LeftDockWidgetArea, browser_dock);
    tabifyDockWidget(setup_dock, browser_dock);
    setup_dock->raise();
    connect(browser_dock, &QDockWidget::visibilityChanged, this, [this](bool visible) {
        if (visible) m_browser->set_folder(default_session_dir());
    });
    build_menus();

    // Settings (remembered between launches); command-line options win.
    m_prompt->setPlainText(options.prompt.isEmpty()
                               ? settings.value("prompt", first_example()).toString()
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
    restoreGeometry(settings.value("geometry").toByteArray());
    set_theme(!options.light && settings.value("dark", true).toBool());

    m_canvas->set_draw([this] {
        viz::draw_canvas(current_runs(), m_view, *m_canvas);
        if (m_view.seek_request >= 0) {
            m_view.step = m_view.seek_request;
            m_view.seek_request = -1;
            QTimer::singleShot(0, this, [this] { refresh_transport(); });
        }
    });
    if (!options.lesson.isEmpty()) {
        const QString err = start_lesson(options.lesson);
        if (!err.isEmpty()) statusBar()->showMessage(err);
    } else if (!options.session.isEmpty()) {
        const QString err = open_session(options.session);
        if (!err.isEmpty()) statusBar()->showMessage(err);
    } else {
        QString dir = options.model_dir;
        if (dir.isEmpty()) dir = QString::fromStdString(default_model_dir().string());
        if (options.record) {
            QDir().mkpath(default_session_dir());
            m_record_path = default_session_dir() + "/session-" +
                            QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss") + ".clsession";
        }
        load_model(dir);
    }

    m_poll = new QTimer(this);
    connect(m_poll, &QTimer::timeout, this, [this] {
        if (!m_bridge) return;
        const auto g = m_bridge->generation();
        if (g != m_seen_generation) {
            m_seen_generation = g;
            m_canvas->update();
            refresh_transport();
        }
    });
    m_poll->start(33);
}

MainWindow::~MainWindow() {
    m_bridge.reset();
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
    s.setValue("steps", m_steps->value());
    s.setValue("dark", m_view.dark);
    s.setValue("geometry", saveGeometry());
}

void MainWindow::build_menus() {
    build_file_menu();
    build_run_menu();
    build_view_menu();
    build_lessons_menu();
    build_help_menu();
}

// The File menu: models, sessions, export, quit.
void MainWindow::build_file_menu() {
    auto* file = menuBar()->addMenu("&File");
    auto* open_model = file->addAction("Open &model folder...");
    connect(open_model, &QAction::triggered, this, [this] {
        const auto dir = QFileDialog::getExistingDirectory(
            this, "Model folder (config.json, safetensors, tokenizer.json)");
        if (!dir.isEmpty()) load_model(dir);
    });
    auto* open = file->addAction("&Open session...");
    open->setShortcut(QKeySequence::Open);
    connect(open, &QAction::triggered, this, [this] {
        const auto path =
            QFileDialog::getOpenFileName(this, "Open session", default_session_dir(),
                                         "CacheLens sessions (*.clsession *.db);;All files (*)");
        if (path.isEmpty()) return;
        const QString err = open_session(path);
        if (!err.isEmpty()) QMessageBox::warning(this, "Cannot open session", err);
    });
    auto* save = file->addAction("&Save session as...");
    save->setShortcut(QKeySequence::Save);
    connect(save, &QAction::triggered, this, [this] {
        const auto path = QFileDialog::getSaveFileName(
            this, "Save session", default_session_dir() + "/untitled.clsession",
            "CacheLens sessions (*.clsession)");
        if (path.isEmpty()) return;
        const QString err = save_session(path);
        if (!err.isEmpty())
            QMessageBox::warning(this, "Cannot save session", err);
        else
            statusBar()->showMessage("Saved " + path, 5000);
    });
    auto* exp = file->addAction("&Export...");
    exp->setShortcut(QKeySequence("Ctrl+E"));
    connect(exp, &QAction::triggered, this, [this] {
        const auto path = QFileDialog::getSaveFileName(
            this, "Export", QDir::homePath() + "/cachelens.png",
            "Canvas figure (*.png);;Per-step metrics (*.csv);;Per-step metrics (*.json)");
        if (path.isEmpty()) return;
        const QString err = export_to(path);
        if (!err.isEmpty())
            QMessageBox::warning(this, "Export failed", err);
        else
            statusBar()->showMessage("Exported " + path, 5000);
    });
    auto* panels = file->addMenu("Export &panel as PNG");
    for (const char* name : {"tokens", "timeline", "recompute", "attention", "drift", "diff"}) {
        connect(panels->addAction(name), &QAction::triggered, this, [this, name] {
            const auto path = QFileDialog::getSaveFileName(
                this, "Export panel", QDir::homePath() + "/" + name + ".png", "PNG (*.png)");
            if (path.isEmpty()) return;
            const QString err = export_to(path, name);
            if (!err.isEmpty()) QMessageBox::warning(this, "Export failed", err);
        });
    }
    auto* live = file->addAction("Back to &live engine");
    connect(live, &QAction::triggered, this, [this] {
        m_replaying = false;
        m_replay_runs.clear();
        m_replay_reader.reset();
        set_engine_controls_enabled(true);
        setWindowTitle("CacheLens");
        m_canvas->update();
    });
    file->addSeparator();
    auto* quit = file->addAction("&Quit");
    quit->setShortcut(QKeySequence::Quit);
    connect(quit, &QAction::triggered, this, &QWidget::close);
}

// The Run menu: restart, transport shortcuts.
void MainWindow::build_run_menu() {
    auto* run = menuBar()->addMenu("&Run");
    auto* apply = run->addAction("&Restart with these settings");
    apply->setShortcut(QKeySequence("Ctrl+R"));
    connect(apply, &QAction::triggered, this, &MainWindow::apply_setup);
    auto* play = run->addAction("&Play / pause");
    play->setShortcut(QKeySequence(Qt::Key_Space));
    connect(play, &QAction::triggered, this, &MainWindow::toggle_play);
    auto* fwd = run->addAction("Step &forward");
    fwd->setShortcut(QKeySequence(Qt::Key_Right));
    connect(fwd, &QAction::triggered, this, &MainWindow::step_forward);
    auto* back = run->addAction("Step &back");
    back->setShortcut(QKeySequence(Qt::Key_Left));
    connect(back, &QAction::triggered, this, &MainWindow::step_back);
    auto* nblock = run->addAction("Next &block");
    nblock->setShortcut(QKeySequence("Shift+Right"));
    connect(nblock, &QAction::triggered, this, [this] { jump_block(1); });
    auto* pblock = run->addAction("Previous b&lock");
    pblock->setShortcut(QKeySequence("Shift+Left"));
    connect(pblock, &QAction::triggered, this, [this] { jump_block(-1); });
    auto* home = run->addAction("First step");
    home->setShortcut(QKeySequence(Qt::Key_Home));
    connect(home, &QAction::triggered, this, &MainWindow::go_home);
    auto* end = run->addAction("Latest step");
    end->setShortcut(QKeySequence(Qt::Key_End));
    connect(end, &QAction::triggered, this, &MainWindow::go_end);
    // Application-wide, so they work from every dock; a focused text field still takes its keys
    // first (Qt's ShortcutOverride), so typing a space into the prompt never toggles Play.
    for (auto* a : {play, fwd, back, nblock, pblock, home, end}) {
        a->setShortcutContext(Qt::ApplicationShortcut);
        addAction(a);
    }
}

// The View menu: theme, colour map, oracle curves, alignment.
void MainWindow::build_view_menu() {
    auto* view = menuBar()->addMenu("&View");
    auto* dark = view->addAction("&Dark theme");
    dark->setCheckable(true);
    dark->setChecked(true);
    connect(dark, &QAction::toggled, this, [this](bool on) { set_theme(on); });
    auto* magma = view->addAction("&Magma colormap");
    magma->setCheckable(true);
    connect(magma, &QAction::toggled, this, [this](bool on) {
        m_view.colormap = on ? viz::Colormap::Magma : viz::Colormap::Viridis;
        m_canvas->update();
    });
    auto* oracle_curves = view->addAction("&Oracle staleness curves (when recorded)");
    oracle_curves->setCheckable(true);
    connect(oracle_curves, &QAction::toggled, this, [this](bool on) {
        m_view.oracle_view = on;
        m_canvas->update();
    });
    auto* progress = view->addAction("Align columns by &progress");
    progress->setCheckable(true);
    connect(progress, &QAction::toggled, this, [this](bool on) {
        m_view.align_by_progress = on;
        m_canvas->update();
    });
}

// The Lessons menu: the bundled lessons and their navigation.
void MainWindow::build_lessons_menu() {
    auto* lessons = menuBar()->addMenu("&Lessons");
    for (const QString& path : bundled_lessons()) {
        QString title = QFileInfo(path).baseName();
        try {
            title = QString::fromStdString(viz::load_lesson(path.toStdString()).title);
        } catch (const std::exception&) {
        }
        connect(lessons->addAction(title), &QAction::triggered, this, [this, path] {
            const QString err = start_lesson(path);
            if (!err.isEmpty()) QMessageBox::warning(this, "Cannot start lesson", err);
        });
    }
    lessons->addSeparator();
    auto* end_l = lessons->addAction("End lesson");
    end_l->setShortcut(QKeySequence(Qt::Key_Escape));
    end_l->setShortcutContext(Qt::ApplicationShortcut);
    connect(end_l, &QAction::triggered, this, [this] { end_lesson(); });
    addAction(end_l);
    auto* back_l = lessons->addAction("Previous lesson step");
    back_l->setShortcut(QKeySequence("Shift+Space"));
    back_l->setShortcutContext(Qt::ApplicationShortcut);
    connect(back_l, &QAction::triggered, this, [this] { lesson_prev(); });
    addAction(back_l);
}

// The Help menu.
void MainWindow::build_help_menu() {
    auto* help = menuBar()->addMenu("&Help");
    connect(help->addAction("&About CacheLens"), &QAction::triggered, this, [this] {
        QMessageBox::about(
            this, "CacheLens",
            "CacheLens " CL_VERSION
            "\nA visualizer and playground for KV/feature caching in diffusion LLMs.");
    });
}

QWidget* MainWindow::build_setup_dock() {
    auto* w = new QWidget();
    auto* layout = new QFormLayout(w);
    m_model_label = new QLabel("(no model)");
    m_model_label->setWordWrap(true);
    layout->addRow("Model", m_model_label);
    m_examples = new QComboBox();
    for (const char* e : kExamples) m_examples->addItem(QString(e).left(48), QString(e));
    layout->addRow("Examples", m_examples);
    m_prompt = new QPlainTextEdit();
    m_prompt->setObjectName("prompt");
    m_prompt->setMinimumHeight(90);
    layout->addRow("Prompt", m_prompt);
    connect(m_examples, QOverload<int>::of(&QComboBox::activated), this,
            [this](int i) { m_prompt->setPlainText(m_examples->itemData(i).toString()); });
    m_chat_template = new QCheckBox("LLaDA chat template");
    m_chat_template->setChecked(true);
    layout->addRow("", m_chat_template);
    auto spin = [](int lo, int hi, int v) {
        auto* s = new QSpinBox();
        s->setRange(lo, hi);
        s->setValue(v);
        return s;
    };
    m_gen_length = spin(1, 4096, 64);
    m_block_length = spin(1, 4096, 32);
    m_steps = spin(1, 65536, 64);
    m_seed = spin(0, 1 << 30, 0);
    layout->addRow("Gen length", m_gen_length);
    layout->addRow("Block length", m_block_length);
    layout->addRow("Steps", m_steps);
    m_remasking = new QComboBox();
    m_remasking->addItems({"low_confidence", "random"});
    layout->addRow("Remasking", m_remasking);
    auto dspin = [](double lo, double hi, double v, double step) {
        auto* s = new QDoubleSpinBox();
        s->setRange(lo, hi);
        s->setDecimals(3);
        s->setSingleStep(step);
        s->setValue(v);
        return s;
    };
    m_threshold = dspin(0, 1, 0, 0.05);
    m_threshold->setToolTip(
        "Parallel decoding: commit every in-block mask with confidence >= threshold (0 = off)");
    m_temperature = dspin(0, 10, 0, 0.1);
    m_cfg = dspin(0, 10, 0, 0.5);
    layout->addRow("Threshold", m_threshold);
    layout->addRow("Temperature", m_temperature);
    layout->addRow("CFG scale", m_cfg);
    layout->addRow("Seed", m_seed);
    m_device = new QComboBox();
    m_device->addItem("cpu");
    m_device->addItem("cuda");
    const auto why = cuda_unavailable_reason();
    if (!why.empty()) {
        auto* item = qobject_cast<QStandardItemModel*>(m_device->model());
        if (item) item->item(1)->setEnabled(false);
        m_device->setItemData(1, QString::fromStdString(why), Qt::ToolTipRole);
    }
    m_device->setToolTip("Where the model runs; changing it reloads the model there");
    layout->addRow("Device", m_device);
    // The model lives on one device: switching reloads it there (runs restart).
    connect(m_device, &QComboBox::currentIndexChanged, this, [this](int) {
        if (m_model) load_model(QString::fromStdString(m_model->directory().string()));
    });
    m_oracle = new QCheckBox("Oracle mode (full forward beside the cached one)");
    layout->addRow("", m_oracle);
    connect(m_oracle, &QCheckBox::toggled, this, [this](bool on) {
        m_view.oracle_view = on;
        apply_setup();
    });
    auto* apply = new QPushButton("Restart");
    apply->setToolTip("Start new runs with these settings (Ctrl+R)");
    m_engine_controls.push_back(apply);
    connect(apply, &QPushButton::clicked, this, &MainWindow::apply_setup);
    layout->addRow("", apply);
    return w;
}

QWidget* MainWindow::build_policies_dock() {
    auto* scroll = new QScrollArea();
    scroll->setWidgetResizable(true);
    auto* inner = new QWidget();
    auto* v = new QVBoxLayout(inner);
    m_presets = new QComboBox();
    m_presets->addItems({"Preset: paper defaults", "Preset: conservative (reproduces the baseline)",
                         "Preset: aggressive (fewer recomputes)"});
    m_presets->setToolTip("Sets the parameters of every policy at once");
    connect(m_presets, QOverload<int>::of(&QComboBox::activated), this,
            [this](int i) { apply_preset(i); });
    v->addWidget(m_presets);
    for (const auto& info : list_policies()) {
        auto* box = new QGroupBox();
        auto* bl = new QFormLayout(box);
        PolicyWidgets pw;
        pw.enabled = new QCheckBox(QString::fromStdString(info.name));
        pw.enabled->setObjectName(QString::fromStdString("policy/" + info.name));
        pw.enabled->setToolTip(QString::fromStdString(info.summary));
        bl->addRow(pw.enabled);
        connect(pw.enabled, &QCheckBox::toggled, this, [this] { apply_setup(); });
        for (const auto& spec : info.params) {
            auto* s = new QDoubleSpinBox();
            s->setObjectName(policy_param_widget_name(QString::fromStdString(info.name),
                                                      QString::fromStdString(spec.name)));
            s->setRange(spec.min, spec.max);
            s->setDecimals(spec.integral() ? 0 : 3);
            s->setSingleStep(spec.integral() ? 1 : (spec.max - spec.min) / 50.0);
            s->setValue(spec.default_value);
            s->setToolTip(QString::fromStdString(param_tooltip(spec)));
            s->setKeyboardTracking(false);
            auto* label = new QLabel(QString::fromStdString(spec.name) +
                                     QString(" [%1]").arg(spec.paper_default));
            label->setToolTip("the value in brackets is the paper default");
            bl->addRow(label, s);
            const std::string name = info.name, key = spec.name;
            connect(s, QOverload<double>::of(&QDoubleSpinBox::valueChanged), this,
                    [this, name, key](double value) {
                        // A parameter change re-runs that column to the current step, in the
                        // background.
                        for (size_t c = 0; c < m_column_policies.size(); ++c)
                            if (m_column_policies[c] == name && m_bridge)
                                m_bridge->set_param(c, key, value);
                    });
            pw.params[spec.name] = s;
        }
        if (!info.params.empty()) {
            auto* reset = new QPushButton("Reset to paper defaults");
            connect(reset, &QPushButton::clicked, this, [this, info] {
                for (const auto& spec : info.params)
                    m_policy_widgets[info.name].params[spec.name]->setValue(spec.paper_default);
            });
            bl->addRow(reset);
        }
        m_policy_widgets[info.name] = pw;
        v->addWidget(box);
    }
    v->addStretch();
    scroll->setWidget(inner);
    scroll->setMinimumWidth(250);
    m_engine_controls.push_back(inner);
    return scroll;
}

QWidget* MainWindow::build_transport() {
    auto* w = new QWidget();
    auto* h = new QHBoxLayout(w);
    auto button = [&](const QString& text, const QString& tip, auto slot) {
        auto* b = new QPushButton(text);
        b->setToolTip(tip);
        connect(b, &QPushButton::clicked, this, slot);
        h->addWidget(b);
        return b;
    };
    button("|<", "First step (Home)", [this] { go_home(); });
    button("<<", "Previous block (Shift+Left)", [this] { jump_block(-1); });
    button("<", "Step back (Left)", [this] { step_back(); });
    m_play = button("Play", "Play / pause (Space)", [this] { toggle_play(); });
    m_play->setObjectName("play");
    m_engine_controls.push_back(m_play);
    button(">", "Step forward (Right)", [this] { step_forward(); });
    button(">>", "Next block (Shift+Right)", [this] { jump_block(1); });
    button(">|", "Latest step (End)", [this] { go_end(); });
    m_scrubber = new QSlider(Qt::Horizontal);
    m_scrubber->setObjectName("scrubber");
    m_scrubber->setRange(0, 0);
    connect(m_scrubber, &QSlider::sliderMoved, this, [this](int v) {
        m_view.step = v;
        m_canvas->update();
    });
    h->addWidget(m_scrubber, 1);
    h->addWidget(new QLabel("speed"));
    m_speed = new QSpinBox();
    m_speed->setRange(0, 1000);
    m_speed->setValue(0);
    m_speed->setSuffix(" steps/s");
    m_speed->setSpecialValueText("max");
    connect(m_speed, QOverload<int>::of(&QSpinBox::valueChanged), this, [this](int v) {
        if (m_bridge) m_bridge->set_speed(v);
    });
    h->addWidget(m_speed);
    m_loop = new QCheckBox("loop");
    m_loop->setToolTip("Regenerate continuously so the throughput chart follows every slider move");
    connect(m_loop, &QCheckBox::toggled, this, [this](bool on) {
        if (!m_bridge) return;
        m_bridge->set_loop(on);
        if (on) m_bridge->set_playing(true);
        refresh_transport();
    });
    h->addWidget(m_loop);
    m_engine_controls.push_back(m_loop);
    m_cancel = new QPushButton("Cancel");
    m_cancel->setToolTip("Stop the re-run or advance in progress");
    m_cancel->setEnabled(false);
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        if (m_bridge) m_bridge->cancel();
    });
    h->addWidget(m_cancel);
    m_status = new QLabel();
    m_status->setMinimumWidth(260);
    h->addWidget(m_status);
    return w;
}

QString MainWindow::policy_param_widget_name(const QString& policy, const QString& key) const {
    return "param/" + policy + "/" + key;
}

void MainWindow::load_model(const QString& dir) {
    if (dir.isEmpty()) {
        m_model_label->setText(
            "No model: the embedded default model is missing (assets/models/). Use File > Open "
            "model folder.");
        return;
    }
    QApplication::setOverrideCursor(Qt::WaitCursor);
    try {
        LoadOptions options;
        if (m_device) options.device = m_device->currentText().toStdString();
        auto model = Model::load(dir.toStdString(), options);
        m_bridge.reset();
        m_model = model;
        m_bridge = std::make_unique<EngineBridge>(m_model, m_threads);
        // Recording starts before the first runs, so every run of this window is in the session.
        if (!m_record_path.isEmpty()) m_bridge->set_recording(m_record_path.toStdString());
        const auto& d = m_model->generation_defaults();
        m_gen_length->setValue(static_cast<int>(d.gen_length));
        m_block_length->setValue(static_cast<int>(d.block_length));
        m_steps->setValue(static_cast<int>(d.steps));
        m_model_label->setText(QString("%1 (%2 M parameters, %3 layers, %4)")
                                   .arg(QString::fromStdString(m_model->name()))
                                   .arg(m_model->parameter_count() / 1e6, 0, 'f', 2)
                                   .arg(m_model->config().n_layers)
                                   .arg(QString::fromStdString(m_model->device())));
        m_model_label->setToolTip(dir);
        QApplication::restoreOverrideCursor();
        apply_setup();
    } catch (const std::exception& e) {
        QApplication::restoreOverrideCursor();
        m_model_label->setText(QString("Could not load: %1").arg(e.what()));
        statusBar()->showMessage(QString("Model not loaded: %1").arg(e.what()));
    }
}

QString MainWindow::default_session_dir() {
    return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/sessions";
}

int MainWindow::available_steps() const {
    int n = m_view.steps_available;
    if (m_replaying)
        for (const auto& r : m_replay_runs) n = std::max(n, static_cast<int>(r.steps.size()));
    else if (m_bridge)
        n = std::max(n, m_bridge->max_step());
    return n;
}

void MainWindow::fetch_visible_attention() {
    if (!m_replay_reader) return;
    int32_t max_steps = 0;
    for (const auto& r : m_replay_runs)
        max_steps = std::max(max_steps, static_cast<int32_t>(r.steps.size()));
    for (auto& run : m_replay_runs) {
        const int32_t step = viz::column_step(run, m_view, max_steps);
        if (step < 0) continue;
        const auto key = std::make_tuple(run.info.run_id, step, m_view.layer);
        if (!m_attention_fetched.insert(key).second) continue;
        try {
            auto loaded = m_replay_reader->load_step(run.info.run_id, step, {m_view.layer});
            auto copy = std::make_shared<trace::StepRecord>(*run.steps[static_cast<size_t>(step)]);
            for (auto& a : loaded->attention) {
                bool present = false;
                for (const auto& b : copy->attention)
                    present |= (a.layer == b.layer && a.head == b.head);
                if (!present) copy->attention.push_back(std::move(a));
            }
            run.steps[static_cast<size_t>(step)] = copy;
        } catch (const std::exception& e) {
            run.status = std::string("attention unavailable: ") + e.what();
        }
    }
}

std::vector<viz::RunView>& MainWindow::current_runs() {
    if (m_replaying) {
        fetch_visible_attention();
        return m_replay_runs;
    }
    // Copy the engine's columns only when it published something new, not on every frame.
    const uint64_t generation = m_bridge ? m_bridge->generation() : 0;
    if (!m_bridge)
        m_live_runs.clear();
    else if (generation != m_live_generation || m_live_runs.empty())
        m_live_runs = m_bridge->snapshot();
    m_live_generation = generation;
    return m_live_runs;
}

void MainWindow::set_engine_controls_enabled(bool on) {
    for (auto* w : m_engine_controls) {
        w->setEnabled(on);
        w->setToolTip(on ? w->toolTip().section(" \u2014 replay", 0, 0)
                         : w->toolTip() +
                               " \u2014 replay of a saved session: the engine is not running");
    }
}

QString MainWindow::open_session(const QString& path) {
    try {
        auto reader = sessions::SessionReader::open(path.toStdString());
        auto runs = reader->runs();
        if (runs.empty()) return path + ": the session holds no runs";
        // Show the latest comparison: the runs recorded together, side by side.
        const int64_t comparison = runs.back().comparison_id;
        std::vector<int64_t> ids;
        for (const auto& r : runs)
            if (r.comparison_id == comparison) ids.push_back(r.run_id);
        trace::TraceStore store(false);
        reader->load_into(store, ids, /*with_attention=*/false);  // attention is fetched on demand
        std::vector<viz::RunView> views;
        for (int32_t id : store.run_ids()) {
            viz::RunView v;
            v.info = *store.run_info(id);
            v.steps = store.steps(id);
            v.summary = store.run_summary(id);
            v.token_text = v.info.token_text;
            for (const auto& s : v.steps)
                for (const auto& [tid, t] : s->new_token_text) v.token_text[tid] = t;
            v.live = false;
            if (v.summary && v.summary->status != trace::RunStatus::Complete)
                v.status = trace::to_string(v.summary->status);
            views.push_back(std::move(v));
        }
        if (m_bridge) m_bridge->set_playing(false);
        m_replay_runs = std::move(views);
        m_replay_reader = std::move(reader);
        m_attention_fetched.clear();
        m_replaying = true;
        m_replay_path = path;
        m_view.step = -1;
        set_engine_controls_enabled(false);
        setWindowTitle("CacheLens \u2014 replay: " + QFileInfo(path).fileName());
        statusBar()->showMessage(
            QString("Replaying %1 (%2 runs); File > Back to live engine returns.")
                .arg(path)
                .arg(m_replay_runs.size()));
        m_canvas->update();
        refresh_transport();
        return "";
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
}

void MainWindow::apply_preset(int index) {
    // Conservative values are the invariant settings of POLICIES.md section 5; aggressive ones
    // trade accuracy for fewer recomputes. Policies not listed keep their paper defaults.
    static const std::map<std::string, std::map<std::string, double>> conservative{
        {"dkv-decode", {{"refresh_interval", 1}}},
        {"dkv-greedy", {{"refresh_interval", 1}}},
        {"dkv-pd", {{"refresh_interval", 1}}},
        {"dllm-cache", {{"prompt_interval", 1}, {"response_interval", 1}}},
        {"d2cache", {{"k", 4096}, {"p", 1.0}}},
        {"elastic", {{"gamma", 1.0}}}};
    static const std::map<std::string, std::map<std::string, double>> aggressive{
        {"dkv-decode", {{"refresh_interval", 32}}},
        {"dkv-greedy", {{"refresh_interval", 8}, {"window", 1}}},
        {"dkv-pd", {{"refresh_interval", 16}}},
        {"dllm-cache", {{"response_interval", 20}, {"rho", 0.1}}},
        {"d2cache", {{"k", 8}, {"p", 0.05}}},
        {"elastic", {{"gamma", 0.7}, {"window", 8}}}};
    for (const auto& info : list_policies()) {
        for (const auto& spec : info.params) {
            double value = spec.default_value;
            const auto& table = index == 1 ? conservative : aggressive;
            if (index > 0) {
                auto p = table.find(info.name);
                if (p != table.end() && p->second.count(spec.name)) value = p->second.at(spec.name);
            }
            m_policy_widgets[info.name].params[spec.name]->setValue(value);
        }
    }
}

QStringList MainWindow::bundled_lessons() {
    QDir dir(QString::fromStdString((assets_dir() / "lessons").string()));
    QStringList out;
    for (const auto& f : dir.entryList({"*.lesson.json"}, QDir::Files, QDir::Name))
        out << dir.filePath(f);
    return out;
}

QString MainWindow::start_lesson(const QString& path) {
    viz::Lesson lesson;
    try {
        lesson = viz::load_lesson(path.toStdString());
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
    const QString err = open_session(QString::fromStdString(lesson.session));
    if (!err.isEmpty()) return err;
    m_lesson = std::move(lesson);
    m_lesson_index = 0;
    apply_lesson_step();
    return "";
}

bool MainWindow::lesson_next() {
    if (!in_lesson() || m_lesson_index + 1 >= static_cast<int>(m_lesson.steps.size())) return false;
    ++m_lesson_index;
    apply_lesson_step();
    return true;
}

bool MainWindow::lesson_prev() {
    if (!in_lesson() || m_lesson_index == 0) return false;
    --m_lesson_index;
    apply_lesson_step();
    return true;
}

void MainWindow::end_lesson() {
    m_lesson_index = -1;
    m_view.highlight.clear();
    m_view.lesson_banner.clear();
    m_view.annotations.clear();
    m_canvas->update();
}

void MainWindow::apply_lesson_step() {
    const auto& st = m_lesson.steps[static_cast<size_t>(m_lesson_index)];
    m_view.step = st.step;
    if (st.layer >= 0) m_view.layer = st.layer;
    m_view.oracle_view = st.oracle;
    m_view.highlight = st.panels;
    m_view.scroll_to_highlight = true;
    m_view.pinned_pos = st.annotations.empty() ? -1 : st.annotations.front().position;
    m_view.annotations = st.annotations;
    std::string banner = m_lesson.title + "  (" + std::to_string(m_lesson_index + 1) + "/" +
                         std::to_string(m_lesson.steps.size()) + ")  " + st.title + "\n" + st.text;
    for (size_t i = 0; i < st.annotations.size(); ++i) {
        const auto& a = st.annotations[i];
        banner += "\n(" + std::to_string(i + 1) + ") step " + std::to_string(a.step) +
                  ", position " + std::to_string(a.position) +
                  (a.layer >= 0 ? ", layer " + std::to_string(a.layer) : "") + ": " + a.text;
    }
    banner += m_lesson_index + 1 < static_cast<int>(m_lesson.steps.size())
                  ? "\n[Space: next   Shift+Space: back   Esc: end]"
                  : "\n[End of the lesson. Esc: end]";
    m_view.lesson_banner = banner;
    m_canvas->update();
    refresh_transport();
}

QString MainWindow::export_to(const QString& path, const QString& panel) {
    const auto runs = current_runs();
    if (path.endsWith(".csv", Qt::CaseInsensitive))
        return QString::fromStdString(export_metrics_csv(runs, path.toStdString()));
    if (path.endsWith(".json", Qt::CaseInsensitive))
        return QString::fromStdString(export_metrics_json(runs, path.toStdString()));
    if (!path.endsWith(".png", Qt::CaseInsensitive))
        return path + ": choose a .png, .csv or .json file";
    // Figure mode: the canvas without its controls, at the widget's full device resolution.
    m_view.figure_mode = true;
    m_view.figure_panel = panel.toStdString();
    const QImage img = m_canvas->grabFramebuffer();
    m_view.figure_mode = false;
    m_view.figure_panel.clear();
    m_canvas->update();
    return img.save(path) ? "" : path + ": cannot write the PNG";
}

QString MainWindow::save_session(const QString& path) {
    const QString source = m_replaying
                               ? m_replay_path
                               : QString::fromStdString(m_bridge ? m_bridge->recording_path() : "");
    if (source.isEmpty()) return "Nothing to save: recording is off.";
    if (!m_replaying && m_bridge) {
        const auto err = m_bridge->flush_recording();
        if (!err.empty()) return QString::fromStdString(err);
    }
    try {
        sessions::SessionReader::open(source.toStdString())->copy_to(path.toStdString());
        return "";
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
}

std::vector<ColumnSpec> MainWindow::selected_columns() const {
    std::vector<ColumnSpec> cols;
    for (const auto& info : list_policies()) {
        const auto& w = m_policy_widgets.at(info.name);
        if (!w.enabled->isChecked()) continue;
        ColumnSpec c;
        c.policy = info.name;
        for (const auto& [k, s] : w.params) c.params[k] = s->value();
        cols.push_back(c);
    }
    return cols;
}

void MainWindow::apply_setup() {
    if (!m_bridge) return;
    RunSetup setup;
    setup.prompt = m_prompt->toPlainText().toStdString();
    setup.chat_template = m_chat_template->isChecked();
    setup.config.gen_length = m_gen_length->value();
    setup.config.block_length = m_block_length->value();
    setup.config.steps = m_steps->value();
    setup.config.remasking =
        m_remasking->currentIndex() == 1 ? Remasking::Random : Remasking::LowConfidence;
    setup.config.threshold = m_threshold->value();
    setup.config.temperature = m_temperature->value();
    setup.config.cfg_scale = m_cfg->value();
    setup.config.seed = static_cast<uint64_t>(m_seed->value());
    setup.oracle = m_oracle->isChecked();
    setup.columns = selected_columns();
    try {
        setup.config.validate(m_model->config().max_sequence_length, 0);
    } catch (const InputError& e) {
        statusBar()->showMessage(QString("Not started: %1").arg(e.what()), 8000);
        return;
    }
    m_column_policies.clear();
    for (const auto& c : setup.columns) m_column_policies.push_back(c.policy);
    m_view.step = -1;
    m_bridge->configure(setup);
    statusBar()->showMessage("Ready: press Play (Space) or step (Right).", 4000);
    refresh_transport();
}

void MainWindow::advance_to(int step) {
    if (m_bridge) m_bridge->advance_to(step);
}

void MainWindow::toggle_play() {
    if (in_lesson()) {  // in a lesson, Space advances it
        lesson_next();
        return;
    }
    if (!m_bridge || m_replaying) return;
    m_bridge->set_playing(!m_bridge->playing());
    if (m_bridge->playing()) m_view.step = -1;  // follow the newest step while playing
    refresh_transport();
}

void MainWindow::step_forward() {
    if (!m_bridge && !m_replaying) return;
    const int latest = available_steps() - 1;
    if (m_view.step >= 0 && m_view.step < latest) {
        ++m_view.step;
    } else if (m_replaying) {
        m_view.step = -1;
    } else {
        m_view.step = -1;
        m_bridge->advance(1);
    }
    m_canvas->update();
    refresh_transport();
}

void MainWindow::step_back() {
    const int latest = available_steps() - 1;
    if (latest < 0) return;
    m_view.step = std::max(0, (m_view.step < 0 ? latest : m_view.step) - 1);
    m_canvas->update();
    refresh_transport();
}

void MainWindow::jump_block(int direction) {
    const int per_block =
        std::max(1, m_steps->value() /
                        std::max(1, m_gen_length->value() / std::max(1, m_block_length->value())));
    const int latest = available_steps() - 1;
    int cur = m_view.step < 0 ? latest : m_view.step;
    int target = direction > 0 ? (cur / per_block + 1) * per_block
                               : std::max(0, (cur - 1) / per_block * per_block);
    if (direction > 0 && target > latest) {
        if (m_replaying)
            target = latest;
        else
            m_bridge->advance_to(target + 1);
        m_view.step = -1;
    } else {
        m_view.step = std::max(0, target);
    }
    m_canvas->update();
    refresh_transport();
}

void MainWindow::go_home() {
    m_view.step = 0;
    m_canvas->update();
    refresh_transport();
}

void MainWindow::go_end() {
    m_view.step = -1;
    m_canvas->update();
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

void MainWindow::refresh_transport() {
    if (!m_bridge && !m_replaying) return;
    const int available = available_steps();
    m_scrubber->setRange(0, std::max(0, available - 1));
    if (!m_scrubber->isSliderDown())
        m_scrubber->setValue(m_view.step < 0 ? std::max(0, available - 1) : m_view.step);
    m_play->setText(m_bridge && m_bridge->playing() ? "Pause" : "Play");
    m_cancel->setEnabled(m_bridge && !m_replaying && m_bridge->busy());
    const QString err = m_bridge ? QString::fromStdString(m_bridge->last_error()) : QString();
    m_status->setText(err.isEmpty() ? QString("step %1 / %2%3   frame %4 ms")
                                          .arg(m_view.step < 0 ? available : m_view.step + 1)
                                          .arg(available)
                                          .arg(m_replaying                    ? "  (replay)"
                                               : m_bridge && m_bridge->busy() ? "  (re-running)"
                                                                              : "")
                                          .arg(m_canvas->last_frame_build_ms(), 0, 'f', 1)
                                    : "error: " + err);
}

}  // namespace cl::app

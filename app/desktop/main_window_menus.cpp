// MainWindow's menus: File, Run, View, Lessons, Help.
#include "app/desktop/main_window.h"
#include "engine/base/assets.h"

#include <QAction>
#include <QActionGroup>
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
#include "viz/panels/panels.h"

namespace cl::app {

void MainWindow::build_menus() {
    build_file_menu();
    build_run_menu();
    build_view_menu();
    build_lessons_menu();
    build_help_menu();
}

// The File menu: models, sessions, export, recording, quit.
void MainWindow::build_file_menu() {
    auto* file = menuBar()->addMenu("&File");
    auto* open_model = file->addAction("Open &model folder...");
    connect(open_model, &QAction::triggered, this, [this] {
        const auto dir = QFileDialog::getExistingDirectory(
            this, "Model folder (config.json, safetensors, tokenizer.json)");
        if (!dir.isEmpty()) this->open_model(dir);
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
        const QString err = export_to(path, QString(), m_figure_scale);
        if (!err.isEmpty())
            QMessageBox::warning(this, "Export failed", err);
        else
            statusBar()->showMessage("Exported " + path, 5000);
    });
    auto* panels = file->addMenu("Export &panel as PNG");
    for (const auto& panel : viz::panel_names()) {
        if (panel == "header" || panel == "inspector") continue;  // not figures of their own
        const char* name = panel.c_str();
        connect(panels->addAction(name), &QAction::triggered, this, [this, name] {
            const auto path = QFileDialog::getSaveFileName(
                this, "Export panel", QDir::homePath() + "/" + name + ".png", "PNG (*.png)");
            if (path.isEmpty()) return;
            const QString err = export_to(path, name, m_figure_scale);
            if (!err.isEmpty()) QMessageBox::warning(this, "Export failed", err);
        });
    }
    auto* scales = file->addMenu("Figure &scale");
    auto* scale_group = new QActionGroup(scales);
    for (int scale : {1, 2, 3}) {
        auto* a = scales->addAction(QString("%1x%2").arg(scale).arg(scale == 2 ? " (print)" : ""));
        a->setCheckable(true);
        a->setChecked(scale == 1);
        scale_group->addAction(a);
        connect(a, &QAction::triggered, this, [this, scale] { m_figure_scale = scale; });
    }
    auto* live = file->addAction("Back to &live engine");
    connect(live, &QAction::triggered, this, &MainWindow::back_to_live);
    file->addSeparator();
    build_recording_actions(file);
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

// The View menu: theme, colour map, oracle curves, alignment, and the docks (a closed dock comes
// back from here).
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
    view->addSeparator();
    build_workshop_actions(view);
    view->addSeparator();
    auto* docks = view->addMenu("&Docks");
    for (auto* dock : findChildren<QDockWidget*>()) docks->addAction(dock->toggleViewAction());
}

namespace {

// A lesson's title for the menu; an unreadable lesson keeps its file name and says so (choosing
// it shows the error).
QString lesson_menu_title(const QString& path) {
    try {
        return QString::fromStdString(viz::load_lesson(path.toStdString()).title);
    } catch (const std::exception&) {
        return QFileInfo(path).baseName() + " (unreadable)";
    }
}

}  // namespace

// The Lessons menu: the bundled lessons and their navigation.
void MainWindow::build_lessons_menu() {
    auto* lessons = menuBar()->addMenu("&Lessons");
    for (const QString& path : bundled_lessons()) {
        connect(lessons->addAction(lesson_menu_title(path)), &QAction::triggered, this,
                [this, path] {
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
    // Space advances a lesson (the Play key); the menu entry is there to be found.
    auto* next_l = lessons->addAction("Next lesson step\tSpace");
    next_l->setObjectName("lesson_next");
    connect(next_l, &QAction::triggered, this, [this] { lesson_next(); });
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

}  // namespace cl::app

// MainWindow's lessons: a bundled session replayed with highlighted panels, one step per Space.
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
    QString err = open_session(QString::fromStdString(lesson.session), /*repair=*/false);
    if (!err.isEmpty()) return err;
    m_lesson = std::move(lesson);
    m_lesson_index = 0;
    if (!m_presenter) {  // a lesson is taught from the canvas; the docks come back after it
        set_presenter(true);
        m_lesson_presenter = true;
    }
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
    if (m_lesson_presenter) set_presenter(false);
    m_lesson_presenter = false;
    m_view.highlight.clear();
    m_view.lesson_banner.clear();
    m_view.annotations.clear();
    m_canvas->update();
}

void MainWindow::apply_lesson_step() {
    const auto& st = m_lesson.steps[static_cast<size_t>(m_lesson_index)];
    set_step(st.step);
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

}  // namespace cl::app

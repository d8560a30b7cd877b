// MainWindow's transport: play, step, scrub and jump over whatever the RunSource holds.
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

int MainWindow::available_steps() const {
    return std::max(m_view.steps_available, source() ? source()->available_steps() : 0);
}

void MainWindow::advance_to(int step) {
    if (source()) source()->advance_to(step);
}

void MainWindow::toggle_play() {
    if (in_lesson()) {  // in a lesson, Space advances it
        lesson_next();
        return;
    }
    if (!source()) return;
    source()->set_playing(!source()->playing());
    if (source()->playing()) m_view.step = -1;  // follow the newest step while playing
    refresh_transport();
}

void MainWindow::step_forward() {
    if (!source()) return;
    const int latest = available_steps() - 1;
    if (m_view.step >= 0 && m_view.step < latest) {
        ++m_view.step;
    } else {
        m_view.step = -1;  // the newest step, and one more where the source makes steps
        source()->advance(1);
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
        if (!source() || !source()->advance_to(target + 1)) target = latest;
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

void MainWindow::refresh_transport() {
    const RunSource* src = source();
    if (!src) return;
    const int available = available_steps();
    m_scrubber->setRange(0, std::max(0, available - 1));
    if (!m_scrubber->isSliderDown())
        m_scrubber->setValue(m_view.step < 0 ? std::max(0, available - 1) : m_view.step);
    m_play->setText(src->playing() ? "Pause" : "Play");
    m_cancel->setEnabled(src->busy());
    const QString err = QString::fromStdString(src->last_error());
    const std::string activity = src->activity();
    m_status->setText(err.isEmpty() ? QString("step %1 / %2%3   frame %4 ms")
                                          .arg(m_view.step < 0 ? available : m_view.step + 1)
                                          .arg(available)
                                          .arg(activity.empty()
                                                   ? QString()
                                                   : QString::fromStdString("  (" + activity + ")"))
                                          .arg(m_canvas->last_frame_build_ms(), 0, 'f', 1)
                                    : "error: " + err);
}

}  // namespace cl::app

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
#include "sessions/session_reader.h"

namespace cl::app {

int MainWindow::available_steps() const {
    return std::max(m_view.steps_available, source() ? source()->available_steps() : 0);
}

void MainWindow::set_step(int step) {
    m_view.step = step;
    m_canvas->update();
    refresh_transport();
}

int MainWindow::shown_step() const {
    const int latest = available_steps() - 1;
    if (latest < 0) return -1;
    return m_view.step < 0 ? latest : std::min(m_view.step, latest);
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
    set_step(m_view.step);
}

void MainWindow::step_forward() {
    if (!source()) return;
    const int latest = available_steps() - 1;
    if (m_view.step >= 0 && m_view.step < latest) {
        set_step(m_view.step + 1);
    } else {
        source()->advance(1);  // the newest step, and one more where the source makes steps
        set_step(-1);
    }
}

void MainWindow::step_back() {
    const int latest = available_steps() - 1;
    if (latest < 0) return;
    set_step(std::max(0, shown_step() - 1));
}

void MainWindow::jump_block(int direction) {
    const int per_block =
        std::max(1, m_steps->value() /
                        std::max(1, m_gen_length->value() / std::max(1, m_block_length->value())));
    const int latest = available_steps() - 1;
    const int cur = std::max(0, shown_step());
    const int target = direction > 0 ? (cur / per_block + 1) * per_block
                                     : std::max(0, (cur - 1) / per_block * per_block);
    if (direction > 0 && target > latest) {
        if (source()) source()->advance_to(target + 1);
        set_step(-1);
    } else {
        set_step(std::max(0, target));
    }
}

void MainWindow::go_home() {
    set_step(0);
}

void MainWindow::go_end() {
    set_step(-1);
}

// "step 12 / 63": the step the canvas shows and the last one there is, counted from 0 like the
// canvas, the lessons and --step; while runs are still being made, how far they are.
QString MainWindow::step_label() const {
    const RunSource* src = source();
    const int available = available_steps();
    QString text = available == 0 ? QString("step - / -")
                                  : QString("step %1 / %2").arg(shown_step()).arg(available - 1);
    int planned = 0;
    for (const auto& run : const_cast<MainWindow*>(this)->current_runs())
        planned = std::max(planned, run.info.steps);
    if (!replaying() && available > 0 && available < planned)
        text += QString("  (%1 of %2 steps made, %3%)")
                    .arg(available)
                    .arg(planned)
                    .arg(100 * available / planned);
    const std::string activity = src ? src->activity() : "";
    if (!activity.empty()) text += QString::fromStdString("  (" + activity + ")");
    return text;
}

void MainWindow::refresh_transport() {
    const RunSource* src = source();
    if (!src) return;
    const int available = available_steps();
    {
        const QSignalBlocker quiet(m_scrubber);  // a programmatic move is not a user's seek
        m_scrubber->setRange(0, std::max(0, available - 1));
        if (!m_scrubber->isSliderDown()) m_scrubber->setValue(std::max(0, shown_step()));
    }
    m_play->setText(src->playing() ? "Pause" : "Play");
    m_cancel->setEnabled(src->busy());
    const QString err = QString::fromStdString(src->last_error());
    m_status->setText(
        err.isEmpty()
            ? step_label() +
                  QString("   frame %1 ms").arg(m_canvas->last_frame_build_ms(), 0, 'f', 1)
            : "error: " + err);
    m_status->setToolTip(
        "The step on screen / the last step there is. Steps count from 0, as in the canvas, the "
        "lessons and --step.");
}

}  // namespace cl::app

// MainWindow's recording: File > Record live runs (on/off), File > Record every loop lap, and the
// status bar's line naming the session being recorded with its size on disk.
#include <QAction>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QMenu>
#include <QSignalBlocker>
#include <QStatusBar>
#include <QTimer>

#include "app/desktop/main_window.h"

namespace cl::app {

void MainWindow::build_recording_actions(QMenu* file) {
    m_record_action = file->addAction("&Record live runs");
    m_record_action->setObjectName("record");
    m_record_action->setCheckable(true);
    m_record_action->setToolTip(
        "Record every Play and re-run as a comparison in a session file (the Sessions dock "
        "lists them); runs already under way are not recorded");
    connect(m_record_action, &QAction::toggled, this, &MainWindow::set_recording);
    m_record_laps_action = file->addAction("Record every loop &lap");
    m_record_laps_action->setObjectName("record_every_lap");
    m_record_laps_action->setCheckable(true);
    m_record_laps_action->setToolTip(
        "Off: a loop keeps its last lap only (each lap replaces the one before)");
    connect(m_record_laps_action, &QAction::toggled, this, [this](bool every_lap) {
        if (bridge()) bridge()->set_record_every_lap(every_lap);
    });
    m_record_label = new QLabel();
    m_record_label->setObjectName("recording");
    statusBar()->addPermanentWidget(m_record_label);
    auto* timer = new QTimer(this);
    connect(timer, &QTimer::timeout, this, &MainWindow::refresh_recording_label);
    timer->start(1000);
}

void MainWindow::set_recording(bool on) {
    if (on && m_record_path.isEmpty()) {
        QDir().mkpath(default_session_dir());
        // Named by the second it starts; a second window (or recording turned off and on) in
        // the same second gets its own file rather than writing into the first one's.
        const QString stem = default_session_dir() + "/session-" +
                             QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss");
        m_record_path = stem + ".clsession";
        for (int n = 2; QFileInfo::exists(m_record_path); ++n)
            m_record_path = QString("%1-%2.clsession").arg(stem).arg(n);
    } else if (!on) {
        m_record_path.clear();
    }
    if (bridge()) bridge()->set_recording(m_record_path.toStdString());
    const QSignalBlocker block(m_record_action);
    m_record_action->setChecked(on);
    refresh_recording_label();
}

qint64 MainWindow::recording_bytes() const {
    if (m_record_path.isEmpty()) return 0;
    // The write-ahead log holds the newest records until a checkpoint folds them into the file.
    return QFileInfo(m_record_path).size() + QFileInfo(m_record_path + "-wal").size();
}

void MainWindow::refresh_recording_label() {
    // The file could not be opened (an unwritable session folder): recording is off, and the
    // label says why until the user tries again.
    const QString failure =
        bridge() ? QString::fromStdString(bridge()->recording_error()) : QString();
    if (!m_record_path.isEmpty() && !failure.isEmpty()) {
        m_record_path.clear();
        const QSignalBlocker block(m_record_action);
        m_record_action->setChecked(false);
    }
    if (m_record_path.isEmpty() && !failure.isEmpty()) {
        m_record_label->setText("not recording: the session file cannot be written");
        m_record_label->setToolTip(failure);
        return;
    }
    if (m_record_path.isEmpty()) {
        m_record_label->setText("not recording");
        m_record_label->setToolTip("File > Record live runs");
        return;
    }
    m_record_label->setText(QString("recording %1 (%2 MB)")
                                .arg(QFileInfo(m_record_path).fileName())
                                .arg(static_cast<double>(recording_bytes()) / 1e6, 0, 'f', 1));
    m_record_label->setToolTip(m_record_path);
}

}  // namespace cl::app

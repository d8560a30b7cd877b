// MainWindow at start-up: what the command line asked for (a lesson, a session, a model) and,
// when it does not open, a dialog that says so and the embedded model running instead, never a
// dead window. Headless figures exit non-zero on startup_error().
#include <QFileInfo>
#include <QMessageBox>
#include <QSettings>
#include <QStatusBar>

#include "app/desktop/main_window.h"
#include "engine/base/assets.h"

namespace cl::app {

void MainWindow::open_at_start(const LaunchOptions& options, const QSettings& settings) {
    if (!options.lesson.isEmpty()) {
        const QString err = start_lesson(options.lesson);
        if (!err.isEmpty())
            fall_back("Cannot start the lesson", err,
                      "The embedded default model is loaded instead; the Lessons menu lists the "
                      "bundled lessons.");
    } else if (!options.session.isEmpty()) {
        const QString err = open_session(options.session);
        if (!err.isEmpty())
            fall_back("Cannot open the session", err,
                      "The embedded default model is loaded instead; File > Open session tries "
                      "another file.");
    } else {
        QString dir = options.model_dir;
        if (dir.isEmpty()) dir = QString::fromStdString(default_model_dir().string());
        if (options.record) set_recording(true);
        if (!options.also_model_dir.isEmpty()) {
            const QString err = set_also_model(options.also_model_dir, false);
            if (!err.isEmpty())
                report_startup_error("Cannot load the second model", err,
                                     "The first model runs alone; Run setup > Also model picks "
                                     "another.");
        }
        // Remembered generation settings win over the model's defaults for the model they were
        // remembered with (they were overwritten at every start).
        const bool remembered =
            settings.contains("gen_length") &&
            settings.value("model_dir").toString() == QFileInfo(dir).absoluteFilePath();
        if (!load_model(dir, !remembered)) fall_back_from_model(dir, statusBar()->currentMessage());
    }
}

// The model folder given at start failed and nothing runs: the embedded model instead, unless the
// folder was the embedded model (then the dialog is all there is). Loads on the GUI thread and in
// the background both end here.
void MainWindow::fall_back_from_model(const QString& dir, const QString& error) {
    const QString embedded = QString::fromStdString(default_model_dir().string());
    if (!embedded.isEmpty() &&
        QFileInfo(dir).absoluteFilePath() != QFileInfo(embedded).absoluteFilePath())
        fall_back("Cannot load the model", error, "The embedded default model is loaded instead.");
    else
        report_startup_error("Cannot load the model", error,
                             "File > Open model folder loads another.");
}

void MainWindow::fall_back(const QString& title, const QString& error, const QString& what_now) {
    statusBar()->showMessage(error);
    report_startup_error(title, error, what_now);
    load_model(QString::fromStdString(default_model_dir().string()));
}

// A warning that does not block (the window, a headless figure and tests go on): what failed
// (the message names the file once) and what to do.
void MainWindow::report_startup_error(const QString& title, const QString& error,
                                      const QString& what_now) {
    if (m_startup_error.isEmpty()) m_startup_error = error;
    auto* box = new QMessageBox(QMessageBox::Warning, title, error + "\n\n" + what_now,
                                QMessageBox::Ok, this);
    box->setObjectName("startup_error");
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

}  // namespace cl::app

// MainWindow's model: loading a folder (on a worker thread with a progress dialog and Cancel when
// its weights are large, so the window never freezes for minutes) and installing it as the live
// engine.
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QProgressDialog>
#include <QSpinBox>
#include <QStatusBar>
#include <QTimer>

#include "app/desktop/device_selector.h"
#include "app/desktop/main_window.h"
#include "engine/base/assets.h"

namespace cl::app {

namespace {

qint64 weight_bytes(const QString& dir) {
    qint64 bytes = 0;
    for (const auto& f : QDir(dir).entryInfoList({"*.safetensors"}, QDir::Files)) bytes += f.size();
    return bytes;
}

}  // namespace

QString MainWindow::model_dir() const {
    return m_model ? QString::fromStdString(m_model->directory().string()) : "";
}

LoadOptions MainWindow::load_options() const {
    LoadOptions options;
    if (m_device) options.device = selected_device(*m_device);
    return options;
}

bool MainWindow::load_model(const QString& dir, bool model_defaults) {
    if (dir.isEmpty()) {
        m_model_label->setText(
            "No model: the embedded default model is missing (assets/models/). Use File > Open "
            "model folder.");
        enable_live_controls();
        return false;
    }
    if (m_background_load_bytes >= 0 && weight_bytes(dir) > m_background_load_bytes) {
        start_background_load(dir, model_defaults);
        return true;
    }
    QApplication::setOverrideCursor(Qt::WaitCursor);
    try {
        auto model = Model::load(dir.toStdString(), load_options());
        QApplication::restoreOverrideCursor();
        install_model(std::move(model), dir, model_defaults);
        return true;
    } catch (const std::exception& e) {
        QApplication::restoreOverrideCursor();
        report_load_failure(e.what());
        return false;
    }
}

void MainWindow::report_load_failure(const QString& error) {
    m_model_label->setText(QString("Could not load: %1").arg(error));
    statusBar()->showMessage(QString("Model not loaded: %1").arg(error));
    if (!m_replay) enable_live_controls();  // a model loaded before keeps running
}

// The live engine on `model`: recording continues into the same session, the setup gets the
// model's generation defaults when asked, and the columns restart.
void MainWindow::install_model(std::shared_ptr<Model> model, const QString& dir,
                               bool model_defaults) {
    m_live.reset();
    m_model = std::move(model);
    m_live = std::make_unique<LiveSource>(m_model, m_threads);
    // Recording starts before the first runs, so every run of this window is in the session.
    if (!m_record_path.isEmpty()) bridge()->set_recording(m_record_path.toStdString());
    bridge()->set_record_every_lap(m_record_laps_action->isChecked());
    if (model_defaults) {
        const auto& d = m_model->generation_defaults();
        m_gen_length->setValue(static_cast<int>(d.gen_length));
        m_block_length->setValue(static_cast<int>(d.block_length));
        m_steps->setValue(static_cast<int>(d.steps));
    }
    m_model_label->setText(
        QString("%1 (%2, %3 M parameters, %4 layers, %5)")
            .arg(QString::fromStdString(m_model->name()),
                 QString::fromStdString(m_model->config().architecture))
            .arg(m_model->parameter_count() / 1e6, 0, 'f', 2)
            .arg(m_model->config().n_layers)
            .arg(QString::fromStdString(m_model->device() + ", " + m_model->dtype())));
    m_model_label->setToolTip(dir);
    if (!m_replay) enable_live_controls();
    refresh_also_model_choices();
    // The second model follows the first onto its device.
    if (m_also_model && m_also_model->device() != m_model->device())
        set_also_model(QString::fromStdString(m_also_model->directory().string()), false);
    apply_setup();
}

// A worker thread reads the weights; a progress dialog shows tensors read and can cancel (the
// model that was running keeps running). The result comes back through the event loop.
void MainWindow::start_background_load(const QString& dir, bool model_defaults) {
    cancel_background_load();
    auto state = std::make_shared<BackgroundLoad>();
    m_loading = state;
    auto* dialog = new QProgressDialog("Loading " + QFileInfo(dir).fileName() + "...", "Cancel", 0,
                                       1000, this);
    dialog->setObjectName("model_loading");
    dialog->setWindowModality(Qt::WindowModal);
    dialog->setMinimumDuration(0);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QProgressDialog::canceled, this, [state] { state->cancel = true; });
    auto* timer = new QTimer(dialog);
    connect(timer, &QTimer::timeout, dialog, [dialog, state] {
        const int total = state->total.load();
        dialog->setValue(total ? 1000 * state->done.load() / total : 0);
        dialog->setLabelText(QString("Loading weights: %1 of %2 tensors")
                                 .arg(state->done.load())
                                 .arg(state->total.load()));
    });
    timer->start(100);
    LoadOptions options = load_options();
    options.progress = [state](size_t done, size_t total) {
        state->done = static_cast<int>(done);
        state->total = static_cast<int>(total);
        return !state->cancel.load();
    };
    statusBar()->showMessage("Loading " + dir + " in the background...");
    state->thread = std::thread([this, state, dir, options, model_defaults, dialog] {
        std::shared_ptr<Model> model;
        QString error;
        try {
            model = Model::load(dir.toStdString(), options);
        } catch (const LoadCancelled&) {
            // Only a cancel stops the load this way, so the flag is already set; said for the
            // reader.
            state->cancel = true;
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        QMetaObject::invokeMethod(
            this,
            [this, state, model, error, dir, model_defaults, dialog] {
                finish_background_load(state, model, error, dir, model_defaults);
                dialog->close();
            },
            Qt::QueuedConnection);
    });
}

void MainWindow::finish_background_load(const std::shared_ptr<BackgroundLoad>& state,
                                        std::shared_ptr<Model> model, const QString& error,
                                        const QString& dir, bool model_defaults) {
    if (state->thread.joinable()) state->thread.join();
    if (m_loading == state) m_loading.reset();
    // Cancelled while loading, or after the worker finished but before this ran.
    if (state->cancel) {
        statusBar()->showMessage("Loading " + dir + " cancelled; the previous model stays.", 8000);
        return;
    }
    if (!error.isEmpty()) {
        report_load_failure(error);
        if (!m_model) fall_back_from_model(dir, error);  // the folder given at start
        return;
    }
    install_model(std::move(model), dir, model_defaults);
    statusBar()->showMessage("Loaded " + dir, 5000);
}

// The window is closing (or another load starts): stop the worker and wait for it.
void MainWindow::cancel_background_load() {
    if (!m_loading) return;
    m_loading->cancel = true;
    if (m_loading->thread.joinable()) m_loading->thread.join();
    m_loading.reset();
}

}  // namespace cl::app

// The second model of the live columns (LLaDA and Dream, or a masked and a uniform-noise model,
// side by side): a Run setup row lists the embedded models and any folder, and every checked
// policy runs on both models, each column compared with its own model's baseline.
#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QStatusBar>
#include <filesystem>

#include "app/desktop/main_window.h"
#include "bridge/engine_bridge.h"
#include "engine/base/assets.h"

namespace cl::app {
namespace {

constexpr int kNone = 0;
const char* const kOtherFolder = "Other folder…";

}  // namespace

void MainWindow::add_also_model_row(QFormLayout* layout) {
    m_also_model_box = new QComboBox();
    m_also_model_box->setObjectName("also_model");
    m_also_model_box->setToolTip(
        "A second model: every checked policy also runs on it, in columns beside the first "
        "model's (each compared with its own model's none)");
    layout->addRow("Also model", m_also_model_box);
    refresh_also_model_choices();
    connect(m_also_model_box, QOverload<int>::of(&QComboBox::activated), this, [this](int index) {
        QString dir = m_also_model_box->itemData(index).toString();
        if (m_also_model_box->itemText(index) == kOtherFolder)
            dir = QFileDialog::getExistingDirectory(this, "Second model folder");
        if (index != kNone && dir.isEmpty()) return refresh_also_model_choices();
        const QString error = set_also_model(dir);
        if (!error.isEmpty()) statusBar()->showMessage("Second model not loaded: " + error, 10000);
    });
}

// "(none)", the embedded models other than the running one, and any folder; the second model
// selected when there is one.
void MainWindow::refresh_also_model_choices() {
    if (!m_also_model_box) return;
    m_also_model_box->clear();
    m_also_model_box->addItem("(none)", QString());
    const auto models = assets_dir() / "models";
    std::error_code ec;
    if (std::filesystem::is_directory(models, ec))
        for (const auto& entry : std::filesystem::directory_iterator(models, ec)) {
            const bool running =
                m_model && std::filesystem::equivalent(entry.path(), m_model->directory(), ec);
            if (entry.is_directory(ec) && !running)
                m_also_model_box->addItem(QString::fromStdString(entry.path().filename().string()),
                                          QString::fromStdString(entry.path().string()));
        }
    if (m_also_model) {
        const QString dir = also_model_dir();
        if (m_also_model_box->findData(dir) < 0)
            m_also_model_box->addItem(QString::fromStdString(m_also_model->name()), dir);
        m_also_model_box->setCurrentIndex(m_also_model_box->findData(dir));
    }
    m_also_model_box->addItem(kOtherFolder, QString());
}

QString MainWindow::also_model_dir() const {
    return m_also_model ? QString::fromStdString(m_also_model->directory().string()) : "";
}

QString MainWindow::set_also_model(const QString& dir, bool restart) {
    QString error;
    if (dir.isEmpty()) {
        m_also_model.reset();
    } else {
        try {
            m_also_model = Model::load(dir.toStdString(), load_options());
        } catch (const std::exception& e) {
            m_also_model.reset();
            error = QString::fromUtf8(e.what());
        }
    }
    refresh_also_model_choices();
    if (restart && bridge()) apply_setup();
    return error;
}

}  // namespace cl::app

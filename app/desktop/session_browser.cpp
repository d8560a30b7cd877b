#include "app/desktop/session_browser.h"

#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QMessageBox>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <set>

#include "sessions/session_reader.h"

namespace cl::app {

SessionBrowser::SessionBrowser(QWidget* parent) : QWidget(parent) {
    auto* v = new QVBoxLayout(this);
    m_table = new QTableWidget(0, 6);
    m_table->setObjectName("sessions");
    m_table->setHorizontalHeaderLabels({"name", "date", "model", "prompt", "policies", "size"});
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    v->addWidget(m_table);
    auto* h = new QHBoxLayout();
    auto add = [&](const QString& text, auto fn) {
        auto* b = new QPushButton(text);
        connect(b, &QPushButton::clicked, this, fn);
        h->addWidget(b);
    };
    const auto open_selected = [this] {
        const auto p = selected_path();
        if (p.isEmpty() || !on_open) return;
        const QString err = on_open(p);
        if (!err.isEmpty()) QMessageBox::warning(this, "Cannot open session", err);
    };
    add("Open", open_selected);
    // A double-click (or Enter) on a row opens it, as in every file list.
    connect(m_table, &QTableWidget::cellActivated, this, open_selected);
    add("Rename", [this] {
        const auto p = selected_path();
        if (p.isEmpty()) return;
        bool ok = false;
        const QString name =
            QInputDialog::getText(this, "Rename session", "Name", QLineEdit::Normal, "", &ok);
        if (!ok) return;
        try {
            sessions::SessionReader::open(p.toStdString())->rename(name.toStdString());
        } catch (const std::exception& e) {
            QMessageBox::warning(this, "Cannot rename", e.what());
        }
        refresh();
    });
    add("Delete", [this] {
        const auto p = selected_path();
        if (p.isEmpty()) return;
        if (QMessageBox::question(this, "Delete session",
                                  "Delete " + QFileInfo(p).fileName() + "?") != QMessageBox::Yes)
            return;
        for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(p + suffix);
        refresh();
    });
    add("Export...", [this] {
        const auto p = selected_path();
        if (p.isEmpty()) return;
        const auto out = QFileDialog::getSaveFileName(
            this, "Export a copy", QFileInfo(p).fileName(), "Sessions (*.clsession)");
        if (out.isEmpty()) return;
        try {
            sessions::SessionReader::open(p.toStdString())->copy_to(out.toStdString());
        } catch (const std::exception& e) {
            QMessageBox::warning(this, "Cannot export", e.what());
        }
    });
    add("Refresh", [this] { refresh(); });
    v->addLayout(h);
}

void SessionBrowser::set_folder(const QString& folder) {
    m_folder = folder;
    refresh();
}

int SessionBrowser::row_count() const {
    return m_table->rowCount();
}
QString SessionBrowser::path_at(int row) const {
    return m_table->item(row, 0)->data(Qt::UserRole).toString();
}

QString SessionBrowser::selected_path() const {
    const auto rows = m_table->selectionModel()->selectedRows();
    return rows.isEmpty() ? QString() : path_at(rows.front().row());
}

void SessionBrowser::refresh() {
    m_table->setRowCount(0);
    QDir dir(m_folder);
    const auto files = dir.entryInfoList({"*.clsession"}, QDir::Files, QDir::Time);
    for (const auto& f : files) {
        const int row = m_table->rowCount();
        m_table->insertRow(row);
        QString name = f.completeBaseName(), date = f.lastModified().toString("yyyy-MM-dd HH:mm"),
                model, prompt, policies;
        try {
            auto r =
                sessions::SessionReader::open(f.absoluteFilePath().toStdString(), /*repair=*/false);
            if (!r->info().name.empty()) name = QString::fromStdString(r->info().name);
            std::set<std::string> names;
            for (const auto& run : r->runs()) {
                names.insert(run.info.policy);
                model = QString::fromStdString(run.info.model_name);
                prompt = QString::fromStdString(run.info.prompt_text).left(60);
            }
            for (const auto& n : names)
                policies += (policies.isEmpty() ? "" : ", ") + QString::fromStdString(n);
        } catch (const std::exception& e) {
            prompt = QString("unreadable: %1").arg(e.what());
        }
        auto* item = new QTableWidgetItem(name);
        item->setData(Qt::UserRole, f.absoluteFilePath());
        m_table->setItem(row, 0, item);
        m_table->setItem(row, 1, new QTableWidgetItem(date));
        m_table->setItem(row, 2, new QTableWidgetItem(model));
        m_table->setItem(row, 3, new QTableWidgetItem(prompt));
        m_table->setItem(row, 4, new QTableWidgetItem(policies));
        m_table->setItem(row, 5,
                         new QTableWidgetItem(QString("%1 MB").arg(f.size() / 1e6, 0, 'f', 1)));
    }
}

}  // namespace cl::app

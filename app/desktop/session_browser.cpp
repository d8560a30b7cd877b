#include "app/desktop/session_browser.h"

#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QMessageBox>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <set>

#include "sessions/session_reader.h"

namespace cl::app {

SessionBrowser::SessionBrowser(QWidget* parent) : QWidget(parent) {
    auto* v = new QVBoxLayout(this);
    m_tree = new QTreeWidget();
    m_tree->setObjectName("sessions");
    m_tree->setColumnCount(6);
    m_tree->setHeaderLabels({"name", "date", "model", "prompt", "policies", "size"});
    m_tree->header()->setStretchLastSection(true);
    m_tree->setSelectionMode(QAbstractItemView::SingleSelection);
    m_tree->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_tree->setRootIsDecorated(true);
    v->addWidget(m_tree);
    // Two rows of buttons: one row of five made the dock (and its tabs) 440 px wide.
    auto* h = new QGridLayout();
    int buttons = 0;
    auto add = [&](const QString& text, void (SessionBrowser::*fn)()) {
        auto* b = new QPushButton(text);
        connect(b, &QPushButton::clicked, this, fn);
        h->addWidget(b, buttons / 3, buttons % 3);
        ++buttons;
    };
    add("Open", &SessionBrowser::open_selected);
    // A double-click (or Enter) on a row opens it, as in every file list. A file row opens its
    // latest comparison (its expand arrow shows the others).
    connect(m_tree, &QTreeWidget::itemActivated, this, &SessionBrowser::open_selected);
    add("Rename", &SessionBrowser::rename_selected);
    add("Delete", &SessionBrowser::delete_selected);
    add("Export...", &SessionBrowser::export_selected);
    add("Refresh", &SessionBrowser::refresh);
    v->addLayout(h);
}

void SessionBrowser::open_selected() {
    const auto p = selected_path();
    if (p.isEmpty() || !on_open) return;
    const QString err = on_open(p, selected_comparison());
    if (!err.isEmpty()) QMessageBox::warning(this, "Cannot open session", err);
}

void SessionBrowser::rename_selected() {
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
}

// A file row deletes the file; a comparison row deletes that comparison (and the runs no other
// comparison holds).
void SessionBrowser::delete_selected() {
    const auto p = selected_path();
    if (p.isEmpty()) return;
    const int64_t comparison = selected_comparison();
    const QString what = comparison < 0 ? QFileInfo(p).fileName()
                                        : m_tree->selectedItems().front()->text(0) + " of " +
                                              QFileInfo(p).fileName();
    if (QMessageBox::question(this, "Delete", "Delete " + what + "?") != QMessageBox::Yes) return;
    if (comparison < 0) {
        for (const char* suffix : {"", "-wal", "-shm"}) QFile::remove(p + suffix);
    } else {
        try {
            sessions::SessionReader::open(p.toStdString())->delete_comparison(comparison);
        } catch (const std::exception& e) {
            QMessageBox::warning(this, "Cannot delete", e.what());
        }
    }
    refresh();
}

void SessionBrowser::export_selected() {
    const auto p = selected_path();
    if (p.isEmpty()) return;
    const auto out = QFileDialog::getSaveFileName(this, "Export a copy", QFileInfo(p).fileName(),
                                                  "Sessions (*.clsession)");
    if (out.isEmpty()) return;
    try {
        sessions::SessionReader::open(p.toStdString())->copy_to(out.toStdString());
    } catch (const std::exception& e) {
        QMessageBox::warning(this, "Cannot export", e.what());
    }
}

void SessionBrowser::set_folder(const QString& folder) {
    m_folder = folder;
    refresh();
}

int SessionBrowser::row_count() const {
    return m_tree->topLevelItemCount();
}
QString SessionBrowser::path_at(int row) const {
    return m_tree->topLevelItem(row)->data(0, Qt::UserRole).toString();
}
int SessionBrowser::comparison_count(int row) const {
    return m_tree->topLevelItem(row)->childCount();
}

QString SessionBrowser::selected_path() const {
    const auto items = m_tree->selectedItems();
    return items.isEmpty() ? QString() : items.front()->data(0, Qt::UserRole).toString();
}

int64_t SessionBrowser::selected_comparison() const {
    const auto items = m_tree->selectedItems();
    if (items.isEmpty() || !items.front()->parent()) return -1;
    return items.front()->data(1, Qt::UserRole).toLongLong();
}

void SessionBrowser::refresh() {
    m_tree->clear();
    QDir dir(m_folder);
    for (const auto& f : dir.entryInfoList({"*.clsession"}, QDir::Files, QDir::Time))
        add_file(f.absoluteFilePath());
}

namespace {
QString megabytes(double bytes) {
    return QString("%1 MB").arg(bytes / 1e6, 0, 'f', 1);
}
// The distinct policies of some runs, in order of first appearance.
QString policy_list(const std::vector<const sessions::RunRecord*>& runs) {
    QStringList names;
    for (const auto* r : runs)
        if (!names.contains(QString::fromStdString(r->info.policy)))
            names << QString::fromStdString(r->info.policy);
    return names.join(", ");
}
}  // namespace

// One file row (what the whole session holds) and a child row per comparison, newest first.
void SessionBrowser::add_file(const QString& path) {
    const QFileInfo f(path);
    auto* file = new QTreeWidgetItem(m_tree);
    file->setData(0, Qt::UserRole, path);
    file->setText(0, f.completeBaseName());
    file->setText(1, f.lastModified().toString("yyyy-MM-dd HH:mm"));
    file->setText(5, megabytes(static_cast<double>(f.size() + QFileInfo(path + "-wal").size())));
    try {
        auto reader = sessions::SessionReader::open(path.toStdString(), /*repair=*/false);
        if (!reader->info().name.empty())
            file->setText(0, QString::fromStdString(reader->info().name));
        const auto runs = reader->runs();
        std::map<int64_t, const sessions::RunRecord*> by_id;
        std::vector<const sessions::RunRecord*> all;
        for (const auto& r : runs) {
            by_id[r.run_id] = &r;
            all.push_back(&r);
        }
        if (!runs.empty()) {
            file->setText(2, QString::fromStdString(runs.back().info.model_name));
            file->setText(3, QString::fromStdString(runs.back().info.prompt_text).left(60));
        }
        file->setText(4, policy_list(all));
        const auto bytes = reader->run_bytes();
        const auto comparisons = reader->comparisons();
        for (size_t k = comparisons.size(); k-- > 0;) {
            const auto& c = comparisons[k];
            std::vector<const sessions::RunRecord*> members;
            double size = 0;
            for (int64_t id : c.run_ids) {
                if (by_id.count(id)) members.push_back(by_id[id]);
                if (bytes.count(id)) size += static_cast<double>(bytes.at(id));
            }
            if (members.empty()) continue;
            auto* item = new QTreeWidgetItem(file);
            item->setData(0, Qt::UserRole, path);
            item->setData(1, Qt::UserRole, QVariant::fromValue<qlonglong>(c.comparison_id));
            item->setText(0, QString("comparison %1").arg(k + 1));
            item->setText(1, QString::fromStdString(c.created_utc));
            item->setText(2, QString::fromStdString(members.front()->info.model_name) + " on " +
                                 QString::fromStdString(members.front()->info.device + " (" +
                                                        members.front()->info.dtype + ")"));
            item->setText(3, QString::fromStdString(members.front()->info.prompt_text).left(60));
            QStringList columns;
            for (const auto* r : members) columns << QString::fromStdString(r->info.policy);
            item->setText(4, columns.join(", "));
            item->setText(5, megabytes(size));
        }
    } catch (const std::exception& e) {
        file->setText(3, QString("unreadable: %1").arg(e.what()));
    }
}

}  // namespace cl::app

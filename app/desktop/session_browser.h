// SessionBrowser: the dock listing saved sessions (name, date, model, prompt, policies, size) and,
// under each, its comparisons (every Play or re-run: time, prompt, columns, size), with open,
// rename, delete and export. Reads files read-only; a file it cannot read is listed with the
// reason instead of being hidden.
#pragma once

#include <QWidget>
#include <cstdint>
#include <functional>

class QTreeWidget;
class QTreeWidgetItem;

namespace cl::app {

class SessionBrowser : public QWidget {
    Q_OBJECT
public:
    explicit SessionBrowser(QWidget* parent = nullptr);
    void set_folder(const QString& folder);
    void refresh();
    const QString& folder() const { return m_folder; }
    // The host opens a comparison of a session (-1: its latest) for replay; returns "" or an
    // error.
    std::function<QString(const QString& path, int64_t comparison_id)> on_open;
    int row_count() const;                // session files listed
    QString path_at(int row) const;       // the file of a row
    int comparison_count(int row) const;  // the comparisons listed under it

private:
    void open_selected();
    void rename_selected();
    void delete_selected();
    void export_selected();
    QString selected_path() const;
    int64_t selected_comparison() const;  // -1: a file row (its latest comparison)
    void add_file(const QString& path);
    QString m_folder;
    QTreeWidget* m_tree = nullptr;
};

}  // namespace cl::app

// SessionBrowser: the dock listing saved sessions (name, date, model, prompt, policies, size) with
// open, rename, delete and export. Reads files read-only; a file it cannot read is listed with
// the reason instead of being hidden.
#pragma once

#include <QWidget>
#include <functional>

class QTableWidget;

namespace cl::app {

class SessionBrowser : public QWidget {
    Q_OBJECT
public:
    explicit SessionBrowser(QWidget* parent = nullptr);
    void set_folder(const QString& folder);
    void refresh();
    const QString& folder() const { return m_folder; }
    // The host opens a session (replay); returns "" or an error.
    std::function<QString(const QString& path)> on_open;
    int row_count() const;
    QString path_at(int row) const;

private:
    QString selected_path() const;
    QString m_folder;
    QTableWidget* m_table = nullptr;
};

}  // namespace cl::app

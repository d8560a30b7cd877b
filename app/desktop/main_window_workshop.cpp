// MainWindow's workshop controls: presenter mode (View > Presenter mode, F11; lessons turn it on
// while they run) gives the canvas the window by hiding every dock but the transport and brings
// them back after; text zoom (Ctrl+= / Ctrl+- / Ctrl+0) scales the canvas's text and layout and
// is remembered; the docks rearrange for small windows.
#include <QAction>
#include <QDockWidget>
#include <QMenu>
#include <QResizeEvent>
#include <QSettings>
#include <QSignalBlocker>
#include <QTimer>
#include <algorithm>

#include "app/desktop/imgui_canvas.h"
#include "app/desktop/main_window.h"

namespace cl::app {

namespace {
constexpr double kZoomStep = 1.15;
}  // namespace

void MainWindow::build_workshop_actions(QMenu* view) {
    m_presenter_action = view->addAction("&Presenter mode (canvas only)");
    m_presenter_action->setObjectName("presenter");
    m_presenter_action->setCheckable(true);
    m_presenter_action->setShortcut(QKeySequence(Qt::Key_F11));
    connect(m_presenter_action, &QAction::toggled, this, &MainWindow::set_presenter);
    auto add_zoom = [&](const QString& text, const QList<QKeySequence>& keys, int direction) {
        auto* a = view->addAction(text);
        a->setShortcuts(keys);
        a->setShortcutContext(Qt::ApplicationShortcut);
        connect(a, &QAction::triggered, this, [this, direction] { zoom(direction); });
        addAction(a);
    };
    add_zoom("Zoom &in", {QKeySequence("Ctrl+="), QKeySequence("Ctrl++")}, 1);
    add_zoom("Zoom &out", {QKeySequence("Ctrl+-")}, -1);
    add_zoom("&Reset zoom", {QKeySequence("Ctrl+0")}, 0);
    for (auto* a : {m_presenter_action}) {
        a->setShortcutContext(Qt::ApplicationShortcut);
        addAction(a);
    }
}

void MainWindow::set_presenter(bool on) {
    if (on != m_presenter) {
        m_presenter = on;
        if (on) {
            m_docks_before_presenter.clear();
            for (auto* dock : findChildren<QDockWidget*>())
                if (dock->objectName() != "transport" && !dock->isHidden()) {
                    m_docks_before_presenter.push_back(dock);
                    dock->hide();
                }
        } else {
            for (auto* dock : m_docks_before_presenter) dock->show();
            m_docks_before_presenter.clear();
        }
    }
    const QSignalBlocker block(m_presenter_action);
    m_presenter_action->setChecked(on);
}

// +1 larger, -1 smaller, 0 back to 100%.
void MainWindow::zoom(int direction) {
    const double scale = direction == 0  ? 1.0
                         : direction > 0 ? m_canvas->font_scale() * kZoomStep
                                         : m_canvas->font_scale() / kZoomStep;
    m_canvas->set_font_scale(scale);
    QSettings().setValue("font_scale", m_canvas->font_scale());
}

void MainWindow::resizeEvent(QResizeEvent* e) {
    QMainWindow::resizeEvent(e);
    const int compact = e->size().width() < kCompactWidth ? 1 : 0;
    if (compact == m_compact_docks) return;
    m_compact_docks = compact;
    // After this resize is laid out: resizeDocks() is ignored before the docks have their place.
    QTimer::singleShot(0, this, [this] { arrange_docks(width()); });
}

void MainWindow::arrange_docks(int window_width) {
    auto* setup = findChild<QDockWidget*>("setup");
    auto* policies = findChild<QDockWidget*>("policies");
    if (!setup || !policies) return;
    m_compact_docks = window_width < kCompactWidth ? 1 : 0;
    if (m_compact_docks) {
        addDockWidget(Qt::LeftDockWidgetArea, policies);
        tabifyDockWidget(setup, policies);
        setup->raise();
        // 1280 px: ~300 px of docks, ~960 px of canvas (three columns of ~310 px).
        resizeDocks({setup}, {std::clamp(window_width / 4, 260, 340)}, Qt::Horizontal);
    } else {
        addDockWidget(Qt::RightDockWidgetArea, policies);
        const int side = std::clamp(window_width / 6, 280, 400);
        resizeDocks({setup, policies}, {side, side}, Qt::Horizontal);
    }
}

}  // namespace cl::app

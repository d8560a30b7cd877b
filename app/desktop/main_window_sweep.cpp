// The Pareto view in the window: a sweep results file opened with --sweep (or File > Open sweep)
// is drawn below the columns; clicking a point loads its parameters into the setup dock and runs
// that policy beside `none`.
#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QStatusBar>

#include "app/desktop/engine_bridge.h"
#include "app/desktop/main_window.h"
#include "sweep/point_metrics.h"
#include "sweep/sweep_store.h"

namespace cl::app {
namespace {

viz::ParetoData pareto_of(const sweep::SweepStore& store) {
    const auto points = store.points();
    const auto all = sweep::sweep_metrics(points);
    viz::ParetoData data;
    data.title = store.path() + " (" + std::to_string(points.size()) + " of " +
                 std::to_string(store.info().total_points) + " points)";
    for (size_t i = 0; i < points.size(); ++i) {
        const auto& m = all.metrics[i];
        data.points.push_back({points[i].policy, points[i].params, m.accuracy, m.accuracy_lo,
                               m.accuracy_hi, m.tokens_per_s, m.speedup, all.frontier[i]});
    }
    return data;
}

}  // namespace

QString MainWindow::open_sweep(const QString& path) {
    try {
        m_pareto = pareto_of(*sweep::SweepStore::open(path.toStdString()));
    } catch (const sweep::SweepFileError& e) {
        return QString::fromStdString(e.what());
    }
    statusBar()->showMessage(QString("Sweep %1: %2 points; click one to run it beside none")
                                 .arg(path)
                                 .arg(m_pareto->points.size()));
    return {};
}

void MainWindow::run_pareto_point(int index) {
    if (!m_pareto || index < 0 || index >= static_cast<int>(m_pareto->points.size())) return;
    const auto& point = m_pareto->points[static_cast<size_t>(index)];
    if (replaying() || !m_live) {
        statusBar()->showMessage(
            "To run a sweep point, return to the live engine (File > Back "
            "to live engine)");
        return;
    }
    auto it = m_policy_widgets.find(point.policy);
    if (it == m_policy_widgets.end()) return;
    for (auto& [name, w] : m_policy_widgets)
        w.enabled->setChecked(name == "none" || name == point.policy);
    for (const auto& [key, value] : point.params) {
        auto spin = it->second.params.find(key);
        if (spin != it->second.params.end()) spin->second->setValue(value);
    }
    apply_setup();
    if (source() && !source()->playing()) source()->set_playing(true);
    statusBar()->showMessage(QString::fromStdString("Running " + point.policy + " beside none"));
}

}  // namespace cl::app

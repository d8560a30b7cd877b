// The Pareto view in the window: a sweep results file opened with --sweep (or File > Open sweep)
// is drawn below the columns; clicking a point loads its parameters into the setup dock and runs
// that policy beside `none`, with the sweep's sampler settings and its first task item as the
// prompt, so the column shows what the point measured.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QPlainTextEdit>
#include <QSpinBox>
#include <QStatusBar>
#include <nlohmann/json.hpp>

#include "app/desktop/main_window.h"
#include "bridge/engine_bridge.h"
#include "engine/base/errors.h"
#include "engine/tasks/task_suite.h"
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

// The first eval item of the spec's first family (what the sweep ran first); "" when none.
std::string first_task_prompt(const nlohmann::json& spec) {
    const auto tasks = spec.value("tasks", nlohmann::json::object());
    const auto families = tasks.value("families", std::vector<std::string>{"arith"});
    if (families.empty()) return "";
    tasks::TaskGenerator gen(tasks.value("seed", uint64_t{1}), tasks::Split::Eval);
    return gen.next(families.front()).prompt;
}

}  // namespace

void MainWindow::apply_sweep_setting() {
    // The spec was validated when the sweep ran; a key it leaves out keeps the dock's value.
    const auto spec = nlohmann::json::parse(m_sweep_spec_json, nullptr, false);
    if (spec.is_discarded() || !spec.is_object()) return;
    const auto sampler = spec.value("sampler", nlohmann::json::object());
    const auto set_int = [&](QSpinBox* box, const char* key) {
        if (sampler.contains(key)) box->setValue(sampler[key].get<int>());
    };
    set_int(m_gen_length, "gen_length");
    set_int(m_block_length, "block_length");
    set_int(m_steps, "steps");
    set_int(m_seed, "seed");
    if (sampler.contains("temperature"))
        m_temperature->setValue(sampler["temperature"].get<double>());
    if (sampler.contains("threshold")) m_threshold->setValue(sampler["threshold"].get<double>());
    const auto set_choice = [&](QComboBox* box, const char* key, auto parse) {
        if (!sampler.contains(key) || !sampler[key].is_string()) return;
        // The spec's name, or a Dream alias of it, as the combo box spells it.
        try {
            box->setCurrentText(to_string(parse(sampler[key].get<std::string>())));
        } catch (const InputError&) {
            return;  // a name this version does not know: the current choice stays
        }
    };
    set_choice(m_remasking, "remasking", parse_remasking);
    set_choice(m_schedule, "schedule", parse_transfer_schedule);
    const std::string prompt = first_task_prompt(spec);
    if (!prompt.empty()) {
        m_prompt->setPlainText(QString::fromStdString(prompt));
        m_chat_template->setChecked(true);  // sweeps generate with the chat template
    }
}

QString MainWindow::open_sweep(const QString& path) {
    try {
        const auto store = sweep::SweepStore::open(path.toStdString());
        m_pareto = pareto_of(*store);
        m_sweep_spec_json = store->info().spec_json;
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
    apply_sweep_setting();
    apply_setup();
    if (source() && !source()->playing()) source()->set_playing(true);
    statusBar()->showMessage(QString::fromStdString("Running " + point.policy + " beside none"));
}

}  // namespace cl::app

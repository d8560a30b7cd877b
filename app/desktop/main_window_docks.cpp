// MainWindow's docks: run setup, policies (one widget per declared parameter), transport; presets.
#include "app/desktop/device_selector.h"
#include "app/desktop/main_window.h"
#include "engine/base/assets.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QShortcut>
#include <QSlider>
#include <QSpinBox>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyleFactory>
#include <QTimer>
#include <QVBoxLayout>
#include <sstream>

#include "app/desktop/export.h"
#include "app/desktop/imgui_canvas.h"
#include "app/desktop/session_browser.h"
#include "engine/base/errors.h"
#include "engine/generation/policy_registry.h"
#include "engine/kernels/kernel_choice.h"
#include "sessions/session_reader.h"

namespace cl::app {

namespace {

// One line of meaning, the paper's value and, for a choice, what each value means.
std::string param_tooltip(const ParamSpec& spec) {
    std::ostringstream out;
    out << spec.help << " (" << to_string(spec.type) << ", paper default " << spec.paper_default
        << ")";
    for (size_t i = 0; i < spec.choices.size(); ++i) out << "\n" << i << " = " << spec.choices[i];
    return out.str();
}

const char* kExamples[] = {
    "What is 047 + 385?",
    "Remember: king=417, house=902, sea=338, fire=561, land=204, city=719, sword=853, hand=126. "
    "What is house?",
    "Reverse the list: 1 7 9 4 5 6",
    "Continue: In the beginning God created",
};

}  // namespace

QStringList MainWindow::example_prompts() {
    QStringList out;
    for (const char* e : kExamples) out << e;
    return out;
}

QWidget* MainWindow::build_setup_dock() {
    // In replay the form is disabled and a summary of the replayed runs' setup sits above it
    // (the form keeps the live engine's values for when the user returns to it).
    auto* outer = new QWidget();
    auto* v = new QVBoxLayout(outer);
    v->setContentsMargins(0, 0, 0, 0);
    m_replay_setup = new QLabel();
    m_replay_setup->setObjectName("replay_setup");
    m_replay_setup->setWordWrap(true);
    m_replay_setup->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_replay_setup->hide();
    v->addWidget(m_replay_setup);
    m_replay_comparisons = new QComboBox();
    m_replay_comparisons->setObjectName("replay_comparisons");
    m_replay_comparisons->setToolTip("Every Play and re-run recorded in this session");
    m_replay_comparisons->hide();
    connect(m_replay_comparisons, qOverload<int>(&QComboBox::activated), this, [this](int index) {
        if (!m_replay || index < 0) return;
        const auto id = m_replay_comparisons->itemData(index).toLongLong();
        const QString path = QString::fromStdString(m_replay->path());
        const QString err = open_session(path, m_replay_repair, id);
        if (!err.isEmpty()) statusBar()->showMessage(err);
    });
    v->addWidget(m_replay_comparisons);
    auto* w = new QWidget();
    m_setup_form = w;
    v->addWidget(w, 1);
    auto* layout = new QFormLayout(w);
    m_model_label = new QLabel("(no model)");
    m_model_label->setWordWrap(true);
    // A long model name without spaces must not widen the dock (the tooltip has the folder).
    m_model_label->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    layout->addRow("Model", m_model_label);
    m_examples = new QComboBox();
    for (const char* e : kExamples) m_examples->addItem(QString(e).left(48), QString(e));
    // Not as wide as the longest example: the dock fits beside the canvas at 1280 px.
    m_examples->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_examples->setMinimumContentsLength(12);
    layout->addRow("Examples", m_examples);
    m_prompt = new QPlainTextEdit();
    m_prompt->setObjectName("prompt");
    m_prompt->setMinimumHeight(90);
    layout->addRow("Prompt", m_prompt);
    connect(m_examples, QOverload<int>::of(&QComboBox::activated), this,
            [this](int i) { m_prompt->setPlainText(m_examples->itemData(i).toString()); });
    m_chat_template = new QCheckBox("Chat template");
    m_chat_template->setToolTip("Wrap the prompt in the model's chat format (LLaDA's or ChatML)");
    m_chat_template->setChecked(true);
    layout->addRow("", m_chat_template);
    auto spin = [](int lo, int hi, int v) {
        auto* s = new QSpinBox();
        s->setRange(lo, hi);
        s->setValue(v);
        return s;
    };
    m_gen_length = spin(1, 4096, 64);
    m_block_length = spin(1, 4096, 32);
    m_steps = spin(1, 65536, 64);
    m_seed = spin(0, 1 << 30, 0);
    m_gen_length->setObjectName("gen_length");
    m_block_length->setObjectName("block_length");
    m_steps->setObjectName("steps");
    m_seed->setObjectName("seed");
    layout->addRow("Gen length", m_gen_length);
    layout->addRow("Block length", m_block_length);
    layout->addRow("Steps", m_steps);
    m_fresh_prefix = spin(static_cast<int>(GenerationConfig::kSystemTurn), 4096, 0);
    m_fresh_prefix->setSpecialValueText("system turn");  // shown at the minimum, kSystemTurn
    m_fresh_prefix->setObjectName("fresh_prefix");
    m_fresh_prefix->setToolTip(
        "Recompute the first N prompt rows at every step under every policy: rows a model keeps "
        "state in, like the Dream model's ChatML system turn (below 0: that turn's rows)");
    layout->addRow("Fresh prefix", m_fresh_prefix);
    auto dspin = [](double lo, double hi, double v, double step) {
        auto* s = new QDoubleSpinBox();
        s->setRange(lo, hi);
        s->setDecimals(3);
        s->setSingleStep(step);
        s->setValue(v);
        return s;
    };
    add_decoding_rows(layout, spin(0, 100000, 0), dspin(0.01, 1, 1, 0.05), dspin(0, 10, 0, 0.1));
    add_also_model_row(layout);
    m_threshold = dspin(0, 1, 0, 0.05);
    m_threshold->setToolTip(
        "Parallel decoding: commit every in-block mask with confidence >= threshold (0 = off)");
    m_temperature = dspin(0, 10, 0, 0.1);
    m_cfg = dspin(0, 10, 0, 0.5);
    layout->addRow("Threshold", m_threshold);
    layout->addRow("Temperature", m_temperature);
    layout->addRow("CFG scale", m_cfg);
    layout->addRow("Seed", m_seed);
    add_compute_rows(layout);
    m_oracle = new QCheckBox("Oracle mode");
    m_oracle->setToolTip(
        "A full forward beside the cached one at every step: the true cost of staleness per "
        "layer (the oracle curves) at about twice the compute");
    layout->addRow("", m_oracle);
    connect(m_oracle, &QCheckBox::toggled, this, [this](bool on) {
        m_view.oracle_view = on;
        apply_setup();
    });
    m_drift = new QCheckBox("K/V drift probe");
    m_drift->setObjectName("drift_probe");
    m_drift->setChecked(true);
    m_drift->setToolTip(
        "Measure each computed row's K/V change per step (the kv-drift panel); two small host "
        "copies per layer, "
        "worth turning off for large models");
    layout->addRow("", m_drift);
    connect(m_drift, &QCheckBox::toggled, this, [this](bool) { apply_setup(); });
    add_attention_detail_rows(layout);
    auto* apply = new QPushButton("Restart");
    apply->setToolTip("Start new runs with these settings (Ctrl+R)");
    m_engine_controls.push_back(apply);
    connect(apply, &QPushButton::clicked, this, &MainWindow::apply_setup);
    layout->addRow("", apply);
    return outer;
}

// Where and how a step's ops run: the device (the model lives on one: switching reloads it there,
// runs restart) and the kernel set (engine/kernels/kernel_choice.h: the new runs take it).
void MainWindow::add_compute_rows(QFormLayout* layout) {
    m_device = make_device_selector();
    m_device->setToolTip("Where the model runs; changing it reloads the model there");
    layout->addRow("Device", m_device);
    connect(m_device, &QComboBox::currentIndexChanged, this, [this](int) {
        if (m_model) load_model(QString::fromStdString(m_model->directory().string()), false);
    });
    m_kernels = new QComboBox();
    m_kernels->setObjectName("kernels");
    for (const auto set : {KernelSet::Fast, KernelSet::Reference})
        m_kernels->addItem(kernel_set_name(set));
    m_kernels->setToolTip(
        "fast: the CPU row kernels and fused layers; reference: every op as plain LibTorch ops "
        "(what the fast kernels are tested against; the same tokens, slower). Restarts the runs.");
    layout->addRow("Kernels", m_kernels);
    connect(m_kernels, &QComboBox::activated, this, [this](int) { apply_setup(); });
}

// The attention maps' level of detail: the per-run budget past which they are pooled into tiles
// (the attention panel names the tiles) and the layers kept at full resolution.
void MainWindow::add_attention_detail_rows(QFormLayout* layout) {
    m_attention_budget = new QDoubleSpinBox;
    m_attention_budget->setObjectName("attention_budget");
    m_attention_budget->setRange(1, 100000);
    m_attention_budget->setDecimals(0);
    m_attention_budget->setSuffix(" MB");
    m_attention_budget->setValue(trace::kDefaultAttentionBudgetBytes / 1e6);
    m_attention_budget->setToolTip(
        "Memory a run's head-mean attention maps may take (every layer, every step). Past it the "
        "maps are pooled into tiles (8x8 tiles: 1/64 of the bytes); the embedded models fit at "
        "full resolution. Applies from the next Restart.");
    layout->addRow("Attention budget", m_attention_budget);
    m_full_attention_layers = new QLineEdit;
    m_full_attention_layers->setObjectName("full_attention_layers");
    m_full_attention_layers->setPlaceholderText("e.g. 0,12");
    m_full_attention_layers->setToolTip(
        "Layers whose attention maps are never pooled, whatever the budget (from the next "
        "Restart)");
    layout->addRow("Full-resolution layers", m_full_attention_layers);
}

// Which masks a step commits: the confidence algorithm, the schedule and Dream's sampling
// options (top-p / top-k filters, alg_temp), on two rows to keep the dock short.
void MainWindow::add_decoding_rows(QFormLayout* layout, QSpinBox* top_k, QDoubleSpinBox* top_p,
                                   QDoubleSpinBox* alg_temp) {
    m_remasking = new QComboBox();
    for (auto r :
         {Remasking::LowConfidence, Remasking::Random, Remasking::TopkMargin, Remasking::Entropy})
        m_remasking->addItem(to_string(r));
    m_remasking->setToolTip(
        "The confidence that ranks masked positions: the predicted token's probability "
        "(Dream: maskgit_plus), a random draw (origin), top-1 minus top-2, or minus the entropy");
    m_schedule = new QComboBox();
    for (auto s : {TransferSchedule::Even, TransferSchedule::Dream})
        m_schedule->addItem(to_string(s));
    m_schedule->setToolTip("Masks committed per step: even (LLaDA) or Dream's int(n (1 - s/t))");
    auto* row = new QHBoxLayout();
    row->addWidget(m_remasking, 1);
    row->addWidget(m_schedule);
    layout->addRow("Remasking", row);
    m_top_p = top_p;
    m_top_k = top_k;
    m_alg_temp = alg_temp;
    m_top_p->setToolTip("Top-p: sample from the smallest set of tokens holding p (1 = all)");
    m_top_k->setToolTip("Top-k: sample from the k most likely tokens (0 = all)");
    m_alg_temp->setToolTip(
        "alg_temp: draw the committed positions by softmax(confidence / alg_temp) (0 = the most "
        "confident)");
    auto* sampling = new QHBoxLayout();
    sampling->addWidget(m_top_p);
    sampling->addWidget(m_top_k);
    sampling->addWidget(m_alg_temp);
    layout->addRow("Top-p, k, alg T", sampling);
}

QWidget* MainWindow::build_policies_dock() {
    auto* scroll = new QScrollArea();
    scroll->setWidgetResizable(true);
    auto* inner = new QWidget();
    auto* v = new QVBoxLayout(inner);
    m_presets = new QComboBox();
    m_presets->addItems({"Preset: paper defaults", "Preset: conservative (reproduces the baseline)",
                         "Preset: aggressive (fewer recomputes)"});
    m_presets->setToolTip("Sets the parameters of every policy at once");
    connect(m_presets, QOverload<int>::of(&QComboBox::activated), this,
            [this](int i) { apply_preset(i); });
    v->addWidget(m_presets);
    for (const auto& info : list_policies()) {
        auto* box = new QGroupBox();
        auto* bl = new QFormLayout(box);
        PolicyWidgets pw;
        pw.enabled = new QCheckBox(QString::fromStdString(info.name));
        pw.enabled->setObjectName(QString::fromStdString("policy/" + info.name));
        pw.enabled->setToolTip(QString::fromStdString(info.summary));
        bl->addRow(pw.enabled);
        connect(pw.enabled, &QCheckBox::toggled, this, [this] { apply_setup(); });
        for (const auto& spec : info.params) {
            auto* s = new QDoubleSpinBox();
            s->setObjectName(policy_param_widget_name(QString::fromStdString(info.name),
                                                      QString::fromStdString(spec.name)));
            s->setRange(spec.min, spec.max);
            s->setDecimals(spec.integral() ? 0 : 3);
            s->setSingleStep(spec.integral() ? 1 : (spec.max - spec.min) / 50.0);
            s->setValue(spec.default_value);
            s->setToolTip(QString::fromStdString(param_tooltip(spec)));
            s->setKeyboardTracking(false);
            // Enter applies a typed value and gives the keys back to the transport (Space, the
            // arrows), which a focused spin box would otherwise keep.
            connect(s, &QAbstractSpinBox::editingFinished, this,
                    [this] { m_canvas->setFocus(Qt::OtherFocusReason); });
            auto* label = new QLabel(QString::fromStdString(spec.name) +
                                     QString(" [%1]").arg(spec.paper_default));
            label->setToolTip("the value in brackets is the paper default");
            bl->addRow(label, s);
            const std::string name = info.name, key = spec.name;
            connect(s, QOverload<double>::of(&QDoubleSpinBox::valueChanged), this,
                    [this, name, key](double value) {
                        // A parameter change re-runs that column to the current step, in the
                        // background.
                        for (size_t c = 0; c < m_column_policies.size(); ++c)
                            if (m_column_policies[c] == name && bridge())
                                bridge()->set_param(c, key, value);
                    });
            pw.params[spec.name] = s;
        }
        if (!info.params.empty()) {
            auto* reset = new QPushButton("Reset to paper defaults");
            connect(reset, &QPushButton::clicked, this, [this, info] {
                for (const auto& spec : info.params)
                    m_policy_widgets[info.name].params[spec.name]->setValue(spec.paper_default);
            });
            bl->addRow(reset);
        }
        m_policy_widgets[info.name] = pw;
        v->addWidget(box);
    }
    v->addStretch();
    scroll->setWidget(inner);
    scroll->setMinimumWidth(250);
    m_engine_controls.push_back(inner);
    return scroll;
}

QWidget* MainWindow::build_transport() {
    auto* w = new QWidget();
    auto* h = new QHBoxLayout(w);
    auto button = [&](const QString& text, const QString& tip, auto slot) {
        auto* b = new QPushButton(text);
        b->setToolTip(tip);
        connect(b, &QPushButton::clicked, this, slot);
        h->addWidget(b);
        return b;
    };
    button("|<", "First step (Home)", [this] { go_home(); });
    button("<<", "Previous block (Shift+Left)", [this] { jump_block(-1); });
    button("<", "Step back (Left)", [this] { step_back(); });
    m_play = button("Play", "Play / pause (Space)", [this] { toggle_play(); });
    m_play->setObjectName("play");
    m_engine_controls.push_back(m_play);
    button(">", "Step forward (Right)", [this] { step_forward(); });
    button(">>", "Next block (Shift+Right)", [this] { jump_block(1); });
    button(">|", "Latest step (End)", [this] { go_end(); });
    m_scrubber = new QSlider(Qt::Horizontal);
    m_scrubber->setObjectName("scrubber");
    m_scrubber->setRange(0, 0);
    // Every user move (a click in the groove, a drag, the keyboard, the wheel) is a seek; the
    // transport's own updates are made with the signals blocked.
    connect(m_scrubber, &QSlider::valueChanged, this, [this](int v) { set_step(v); });
    h->addWidget(m_scrubber, 1);
    h->addWidget(new QLabel("speed"));
    m_speed = new QSpinBox();
    m_speed->setRange(0, 1000);
    m_speed->setValue(0);
    m_speed->setSuffix(" steps/s");
    m_speed->setSpecialValueText("max");
    connect(m_speed, QOverload<int>::of(&QSpinBox::valueChanged), this, [this](int v) {
        if (bridge()) bridge()->set_speed(v);
    });
    h->addWidget(m_speed);
    m_loop = new QCheckBox("loop");
    m_loop->setObjectName("loop");
    m_loop->setToolTip("Regenerate continuously so the throughput chart follows every slider move");
    connect(m_loop, &QCheckBox::toggled, this, [this](bool on) {
        if (!bridge()) return;
        bridge()->set_loop(on);
        if (on) bridge()->set_playing(true);
        refresh_transport();
    });
    h->addWidget(m_loop);
    m_engine_controls.push_back(m_loop);
    m_cancel = new QPushButton("Cancel");
    m_cancel->setToolTip("Stop the re-run or advance in progress");
    m_cancel->setEnabled(false);
    m_cancel->setObjectName("cancel");
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        if (!bridge()) return;
        // Say what stopped and where: the columns keep the steps made so far.
        const QString work = QString::fromStdString(bridge()->work());
        bridge()->cancel();
        statusBar()->showMessage(work.isEmpty()
                                     ? QString("Cancelled.")
                                     : "Cancelled " + work + "; the steps made so far are kept.",
                                 8000);
    });
    h->addWidget(m_cancel);
    m_status = new QLabel();
    m_status->setObjectName("step_label");
    m_status->setMinimumWidth(260);
    h->addWidget(m_status);
    return w;
}

QString MainWindow::policy_param_widget_name(const QString& policy, const QString& key) const {
    return "param/" + policy + "/" + key;
}

void MainWindow::apply_preset(int index) {
    // Conservative values are the invariant settings of POLICIES.md section 5; aggressive ones
    // trade accuracy for fewer recomputes. Policies not listed keep their paper defaults.
    static const std::map<std::string, std::map<std::string, double>> conservative{
        {"dkv-decode", {{"refresh_interval", 1}}},
        {"dkv-greedy", {{"refresh_interval", 1}}},
        {"dkv-pd", {{"refresh_interval", 1}}},
        {"dllm-cache", {{"prompt_interval", 1}, {"response_interval", 1}}},
        {"d2cache", {{"k", 4096}, {"p", 1.0}}},
        {"elastic", {{"gamma", 1.0}}}};
    static const std::map<std::string, std::map<std::string, double>> aggressive{
        {"dkv-decode", {{"refresh_interval", 32}}},
        {"dkv-greedy", {{"refresh_interval", 8}, {"window", 1}}},
        {"dkv-pd", {{"refresh_interval", 16}}},
        {"dllm-cache", {{"response_interval", 20}, {"rho", 0.1}}},
        {"d2cache", {{"k", 8}, {"p", 0.05}}},
        {"elastic", {{"gamma", 0.7}, {"window", 8}}}};
    for (const auto& info : list_policies()) {
        for (const auto& spec : info.params) {
            double value = spec.default_value;
            const auto& table = index == 1 ? conservative : aggressive;
            if (index > 0) {
                auto p = table.find(info.name);
                if (p != table.end() && p->second.count(spec.name)) value = p->second.at(spec.name);
            }
            m_policy_widgets[info.name].params[spec.name]->setValue(value);
        }
    }
}

std::vector<ColumnSpec> MainWindow::selected_columns() const {
    std::vector<ColumnSpec> cols;
    for (const auto& info : list_policies()) {
        const auto& w = m_policy_widgets.at(info.name);
        if (!w.enabled->isChecked()) continue;
        ColumnSpec c;
        c.policy = info.name;
        for (const auto& [k, s] : w.params) c.params[k] = s->value();
        cols.push_back(c);
    }
    // The second model's columns after the first's, in the same order (each compared with its
    // own model's none).
    const size_t first = cols.size();
    for (size_t i = 0; m_also_model && i < first; ++i) {
        cols.push_back(cols[i]);
        cols.back().model = m_also_model;
    }
    return cols;
}

}  // namespace cl::app

// MainWindow: the Qt shell. Left dock: run setup; right dock: policies with their parameters;
// bottom dock: transport; centre: the ImGui canvas with one column per selected policy.
#pragma once

#include <QMainWindow>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <set>
#include <tuple>

#include "app/desktop/run_source.h"
#include "viz/lesson.h"
#include "viz/viz_context.h"

class QCheckBox;
class QComboBox;
class QDockWidget;
class QDoubleSpinBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSlider;
class QMenu;
class QAction;
class QSettings;
class QSpinBox;
class QTimer;

namespace cl::app {

class ImGuiCanvas;
class SessionBrowser;

struct LaunchOptions {
    QString model_dir;
    QString prompt;
    QStringList policies;  // empty = remembered or none,dkv-decode,elastic
    int threads = 1;
    bool light = false;
    bool presenter = false;  // start in presenter mode (every dock but the transport hidden)
    bool record = true;      // record live runs into the per-user session folder (XDG data dir)
    // Model folders with more weights than this load on a worker thread with progress and
    // Cancel (the embedded model has ~6 MB); negative: never (headless figures need the model
    // before they draw).
    qint64 background_load_bytes = 64ll << 20;
    QString lesson;          // start this lesson (replays its session)
    QString session;         // open this session file for replay instead of running live
    QString also_model_dir;  // a second model's columns beside the first's
    // MB a run's head-mean attention maps may take (pooled past it); 0: the remembered setting
    double attention_budget_mb = 0;
};

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(const LaunchOptions& options, QWidget* parent = nullptr);
    ~MainWindow() override;

    // The live engine (nullptr without a model); it keeps running behind a replay.
    EngineBridge* bridge() { return m_live ? &m_live->bridge() : nullptr; }
    // What the window shows: the replay when one is open, else the live engine.
    RunSource* source();
    const RunSource* source() const;
    ImGuiCanvas* canvas() { return m_canvas; }
    viz::ViewState& view() { return m_view; }
    void apply_setup();         // (re)configure the engine from the docks
    void advance_to(int step);  // headless figures and tests
    QString policy_param_widget_name(const QString& policy, const QString& key) const;
    // Replay: opens a session (the latest comparison in it) without the engine. Returns an error
    // message ("" on success); nothing is changed when it fails.
    // `repair`: the file may be migrated and repaired in place (a user's session); bundled lessons
    // are opened without it and never change.
    // `comparison_id`: the comparison to show (-1: the latest).
    QString open_session(const QString& path, bool repair = true, int64_t comparison_id = -1);
    QString save_session(const QString& path);  // a copy of the current recording
    // File > Open model folder: the live engine on `dir` (a large folder loads in the
    // background; the model running now keeps running until it is ready or cancelled).
    void open_model(const QString& dir) { load_model(dir); }
    bool loading_model() const { return m_loading != nullptr; }
    QString model_dir() const;  // "" before a model is loaded
    // A second model whose columns run beside the first's (LLaDA and Dream side by side): every
    // checked policy runs on both. "" removes it. Returns an error message ("" on success).
    // `restart`: start new runs with it at once.
    QString set_also_model(const QString& dir, bool restart = true);
    QString also_model_dir() const;
    // Presenter mode: every dock but the transport hidden (on), then restored (off).
    void set_presenter(bool on);
    bool presenter() const { return m_presenter; }
    void zoom(int direction);  // canvas text: +1 larger, -1 smaller, 0 reset (remembered)
    // Records live runs into a new session in the sessions folder (on) or stops (off).
    void set_recording(bool on);
    QString recording_path() const { return m_record_path; }
    void back_to_live();  // closes a replay (and a lesson running over it)
    // The Pareto view of a sweep results file (below the columns); "" on success.
    QString open_sweep(const QString& path);
    // Loads a Pareto point's policy and parameters into the setup dock and runs it beside none.
    void run_pareto_point(int index);
    bool replaying() const { return m_replay != nullptr; }
    // What failed while the window opened (a session, lesson or model given on the command
    // line), "" when everything opened; the window shows it in a dialog and falls back.
    const QString& startup_error() const { return m_startup_error; }
    static QString default_session_dir();
    static QStringList example_prompts();  // the setup dock's examples; the first is the default
    // Export: canvas PNG in figure mode (no controls), or per-step metrics as CSV / JSON.
    // A PNG figure: `scale` pixels per point (2 for print; text and layout scale with it) and
    // `columns` (0-based; empty: every column).
    QString export_to(const QString& path, const QString& panel = QString(), int scale = 1,
                      const std::set<int>& columns = {});
    // Lessons: start one (opens its session), step with Space; "" on success.
    QString start_lesson(const QString& path);
    bool lesson_next();  // false at the end
    bool lesson_prev();
    void end_lesson();
    bool in_lesson() const { return m_lesson_index >= 0; }
    int lesson_index() const { return m_lesson_index; }
    static QStringList bundled_lessons();
    // Compact (a window under kCompactWidth px): Policies is a tab beside Run setup and Sessions
    // on the left, so the canvas keeps most of the width; wide: Policies on the right. Dock widths
    // follow the window's. Called when the width crosses the line.
    static constexpr int kCompactWidth = 1500;
    void arrange_docks(int window_width);
    bool compact_docks() const { return m_compact_docks == 1; }

public slots:
    void toggle_play();
    void step_forward();
    void step_back();
    void jump_block(int direction);
    void go_home();
    void go_end();
    void set_step(int step);

protected:
    void closeEvent(QCloseEvent* e) override;
    void resizeEvent(QResizeEvent* e) override;

private:
    void build_docks();
    void build_menus();
    void build_file_menu();
    void build_run_menu();
    void build_view_menu();
    void build_lessons_menu();
    void build_help_menu();
    void build_recording_actions(QMenu* file);
    void build_workshop_actions(QMenu* view);
    void refresh_recording_label();
    qint64 recording_bytes() const;  // the recorded session on disk (file and its log)
    QWidget* build_setup_dock();
    QWidget* build_policies_dock();
    void add_compute_rows(QFormLayout* layout);
    void add_attention_detail_rows(QFormLayout* layout);
    void add_decoding_rows(QFormLayout* layout, QSpinBox* top_k, QDoubleSpinBox* top_p,
                           QDoubleSpinBox* alg_temp);
    QWidget* build_transport();
    // `model_defaults`: put the model's generation defaults into the setup dock (a newly opened
    // model); false keeps what is there (remembered values at start-up, a device switch).
    // Returns false (and says why in the status bar) when the folder does not load; a large one
    // loads in the background (true: started) with a progress dialog and Cancel.
    bool load_model(const QString& dir, bool model_defaults = true);
    struct BackgroundLoad {
        std::thread thread;
        std::atomic<bool> cancel{false};
        std::atomic<int> done{0}, total{0};
    };
    LoadOptions load_options() const;
    void report_load_failure(const QString& error);
    void install_model(std::shared_ptr<Model> model, const QString& dir, bool model_defaults);
    void start_background_load(const QString& dir, bool model_defaults);
    void finish_background_load(const std::shared_ptr<BackgroundLoad>& state,
                                std::shared_ptr<Model> model, const QString& error,
                                const QString& dir, bool model_defaults);
    void cancel_background_load();
    std::shared_ptr<BackgroundLoad> m_loading;  // a load in progress
    void set_theme(bool dark);
    void refresh_transport();
    // The one step cursor: every seek (transport, keys, scrubber, canvas, lessons, --step) goes
    // through set_step; -1 follows the newest step.
    QString step_label() const;
    int shown_step() const;  // the step the canvas shows (-1: none yet)
    std::vector<ColumnSpec> selected_columns() const;
    void save_settings() const;
    void set_engine_controls_enabled(bool on, const QString& why = QString());
    void enable_live_controls();
    void open_at_start(const LaunchOptions& options, const QSettings& settings);
    // Start-up failures: a non-blocking dialog (and startup_error()); fall_back also runs the
    // embedded model.
    void report_startup_error(const QString& title, const QString& error, const QString& what_now);
    void fall_back(const QString& title, const QString& error, const QString& what_now);
    void fall_back_from_model(const QString& dir, const QString& error);
    void show_replay_setup(bool replaying);     // the setup dock for a replay or the live engine
    std::vector<viz::RunView>& current_runs();  // the source's columns for this frame
    int available_steps() const;

    std::shared_ptr<Model> m_model;
    std::shared_ptr<Model> m_also_model;  // the second model's columns (null: none)
    QComboBox* m_also_model_box = nullptr;
    void add_also_model_row(QFormLayout* layout);
    void refresh_also_model_choices();
    std::unique_ptr<LiveSource> m_live;
    std::unique_ptr<ReplaySource> m_replay;
    std::vector<viz::RunView> m_no_runs;  // what the canvas draws without a source
    ImGuiCanvas* m_canvas = nullptr;
    viz::ViewState m_view;
    int m_threads = 1;
    qint64 m_background_load_bytes = 64ll << 20;  // LaunchOptions::background_load_bytes
    QTimer* m_poll = nullptr;
    uint64_t m_seen_generation = 0;
    QString m_record_path;  // where live runs are recorded ("" = off)
    QString m_startup_error;
    QAction* m_presenter_action = nullptr;
    int m_figure_scale = 1;  // File > Figure scale: pixels per point of exported figures
    bool m_presenter = false;
    bool m_lesson_presenter = false;  // presenter mode turned on by the running lesson
    std::vector<QDockWidget*> m_docks_before_presenter;
    int m_compact_docks = -1;  // -1: not arranged yet, 0: wide, 1: compact
    QAction *m_record_action = nullptr, *m_record_laps_action = nullptr;
    QLabel* m_record_label = nullptr;
    viz::Lesson m_lesson;
    int m_lesson_index = -1;
    void apply_lesson_step();
    std::vector<QWidget*> m_engine_controls;
    std::optional<viz::ParetoData> m_pareto;  // an opened sweep (--sweep)
    std::string m_sweep_spec_json;            // its spec: sampler and task items of every point
    int m_pareto_clicked = -1;
    void apply_sweep_setting();  // the sweep's sampler and first task item into the setup dock

    // Run setup
    QLabel* m_model_label = nullptr;
    QLabel* m_replay_setup = nullptr;           // in replay: the replayed runs' prompt and settings
    QComboBox* m_replay_comparisons = nullptr;  // in replay: the file's comparisons, one shown
    bool m_replay_repair = true;                // how the replayed file was opened
    void fill_replay_comparisons();
    QWidget* m_setup_form = nullptr;  // the live setup (disabled in replay)
    QPlainTextEdit* m_prompt = nullptr;
    QComboBox* m_examples = nullptr;
    QCheckBox* m_chat_template = nullptr;
    QSpinBox *m_gen_length = nullptr, *m_block_length = nullptr, *m_steps = nullptr,
             *m_seed = nullptr, *m_fresh_prefix = nullptr;
    QComboBox *m_remasking = nullptr, *m_schedule = nullptr, *m_device = nullptr;
    QSpinBox* m_top_k = nullptr;
    QDoubleSpinBox *m_top_p = nullptr, *m_alg_temp = nullptr;
    QDoubleSpinBox *m_threshold = nullptr, *m_temperature = nullptr, *m_cfg = nullptr;
    QCheckBox* m_oracle = nullptr;
    QCheckBox* m_drift = nullptr;
    QComboBox* m_kernels = nullptr;                // KernelSet by name (kernel_choice.h)
    QDoubleSpinBox* m_attention_budget = nullptr;  // MB a run's head-mean maps may take
    QLineEdit* m_full_attention_layers = nullptr;  // layers never pooled ("0,12")
    // Policies
    struct PolicyWidgets {
        QCheckBox* enabled = nullptr;
        std::map<std::string, QDoubleSpinBox*> params;
    };
    std::map<std::string, PolicyWidgets> m_policy_widgets;
    std::vector<std::string> m_column_policies;  // policies of the configured columns, in order
    // Transport
    QPushButton* m_play = nullptr;
    QSlider* m_scrubber = nullptr;
    QLabel* m_status = nullptr;
    QPushButton* m_cancel = nullptr;
    QComboBox* m_presets = nullptr;
    SessionBrowser* m_browser = nullptr;

public:
    SessionBrowser* session_browser() { return m_browser; }

private:
    void apply_preset(int index);
    QCheckBox* m_loop = nullptr;
    QSpinBox* m_speed = nullptr;
};

}  // namespace cl::app

// The real window under Xvfb: start on a model, click Play with QTest, change a policy parameter,
// screenshot, and check that the panels and their colours are where they should be.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressDialog>
#include <QPushButton>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStatusBar>
#include <QSurfaceFormat>
#include <QTest>
#include <QTreeWidget>

#include "app/desktop/imgui_canvas.h"
#include "app/desktop/main_window.h"
#include "app/desktop/session_browser.h"
#include "bridge/engine_bridge.h"
#include "engine/base/assets.h"
#include "engine/base/process_memory.h"
#include "engine/model/model.h"
#include "engine/tasks/task_suite.h"
#include "sessions/session_reader.h"
#include "sessions/session_writer.h"
#include "sweep/sweep_store.h"
#include "test_util.h"
#include "viz/palette.h"
#include "viz/panels/panels.h"

namespace cl::app {
namespace {

bool wait_for(const std::function<bool()>& cond, int ms) {
    QElapsedTimer t;
    t.start();
    while (!cond() && t.elapsed() < ms) QTest::qWait(20);
    return cond();
}

// Counts pixels of `rgb` (within a small tolerance) inside `rect` of `img`.
int count_color(const QImage& img, const QRect& rect, QRgb rgb, int tol = 6) {
    int n = 0;
    for (int y = rect.top(); y <= rect.bottom(); y += 2)
        for (int x = rect.left(); x <= rect.right(); x += 2) {
            const QRgb p = img.pixel(x, y);
            if (std::abs(qRed(p) - qRed(rgb)) <= tol && std::abs(qGreen(p) - qGreen(rgb)) <= tol &&
                std::abs(qBlue(p) - qBlue(rgb)) <= tol)
                ++n;
        }
    return n;
}

// Options for a window on the tiny test model, not recording.
LaunchOptions tiny_model_options(const QString& prompt, const QStringList& policies) {
    LaunchOptions o;
    o.model_dir = QString::fromStdString(test::make_tiny_model("gui", 32, 2, 4, 4, 3).string());
    o.prompt = prompt;
    o.policies = policies;
    o.record = false;
    return o;
}

QRgb rgb_of(ImU32 c) {
    return qRgb((c >> IM_COL32_R_SHIFT) & 0xff, (c >> IM_COL32_G_SHIFT) & 0xff,
                (c >> IM_COL32_B_SHIFT) & 0xff);
}

// The UI thread copies the columns every frame while the engine thread replaces them on each
// Restart: the column vector was cleared without the lock snapshot() takes, and the soak
// benchmark crashed with heap corruption within a few dozen restarts.
TEST(EngineBridge, SnapshotsWhileRestartingAreSafe) {
    auto model = Model::load(test::make_tiny_model("bridge", 32, 2, 4, 4, 3));
    EngineBridge bridge(model, 1);
    std::atomic<bool> stop{false};
    size_t copied = 0;
    std::thread ui([&] {
        while (!stop)
            for (const auto& r : bridge.snapshot()) copied += r.steps.size();
    });
    for (int k = 0; k < 60; ++k) {
        RunSetup s;
        s.prompt = "hi";
        s.config.gen_length = 32;
        s.config.block_length = 16;
        s.config.steps = 16;
        s.columns = {{"none", {}, nullptr}, {k % 2 ? "dkv-decode" : "elastic", {}, nullptr}};
        if (k % 3 == 0) s.columns.pop_back();
        const uint64_t before = bridge.generation();
        bridge.configure(s);         // one at a time: queued configures coalesce into the last one
        bridge.advance_to(1 << 20);  // full columns: the copies take a while
        ASSERT_TRUE(wait_for(
            [&] {
                if (bridge.generation() == before || bridge.busy()) return false;
                const auto runs = bridge.snapshot();
                return runs.size() == s.columns.size() &&
                       std::all_of(runs.begin(), runs.end(),
                                   [](const auto& r) { return r.summary.has_value(); });
            },
            30000));
    }
    ASSERT_TRUE(wait_for([&] { return !bridge.busy() && bridge.max_step() > 0; }, 30000));
    stop = true;
    ui.join();
    EXPECT_GT(copied, 0u);
}

long resident_kb() {
    return static_cast<long>(resident_bytes() / 1024);
}

// The window in loop mode, recording, for CACHELENS_LOOP_SECONDS (default 3600): resident memory
// and the session file stay bounded after warm-up (the first fifth): a loop keeps its last lap
// only, and nothing accumulates per lap. Label long.
TEST(GuiLong, AnHourOfLoopModeKeepsMemoryAndTheSessionBounded) {
    const char* env = std::getenv("CACHELENS_LOOP_SECONDS");
    const int seconds = env ? std::max(10, std::atoi(env)) : 3600;
    auto o = tiny_model_options("What is 245 + 699?", {"none", "dkv-decode", "elastic"});
    o.record = true;
    MainWindow w(o);
    w.resize(1280, 720);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    const QString path = w.recording_path();
    auto* loop = w.findChild<QCheckBox*>("loop");
    loop->setChecked(true);  // starts playing
    ASSERT_TRUE(wait_for([&] { return w.bridge()->playing(); }, 5000));
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    long warm_kb = 0, last_kb = 0;
    qint64 warm_bytes = 0, last_bytes = 0;
    size_t laps = 0;
    while (elapsed() < seconds) {
        QTest::qWait(1000);
        last_kb = resident_kb();
        last_bytes = QFileInfo(path).size() + QFileInfo(path + "-wal").size();
        laps = w.bridge()->snapshot()[0].throughput.size();
        if (elapsed() < seconds / 5.0) {
            warm_kb = last_kb;
            warm_bytes = last_bytes;
        }
    }
    loop->setChecked(false);
    std::printf(
        "loop mode for %d s: %zu laps or more; resident %.1f MB after warm-up -> %.1f MB; "
        "session %.1f MB -> %.1f MB\n",
        seconds, laps, warm_kb / 1024.0, last_kb / 1024.0, warm_bytes / 1e6, last_bytes / 1e6);
    EXPECT_GT(laps, 3u);
    EXPECT_LE(last_kb, warm_kb * 1.05) << "resident memory grew more than 5% after warm-up";
    EXPECT_LE(last_bytes, std::max<qint64>(warm_bytes * 2, 8 << 20))
        << "the session grows with the laps";
}

TEST(Gui, PlayStepsChangeASliderAndScreenshot) {
    auto o = tiny_model_options("What is 1 + 2?", {"none", "dkv-decode", "elastic"});
    MainWindow w(o);
    w.resize(1400, 900);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    ASSERT_NE(w.bridge(), nullptr) << "the model loaded";

    auto* play = w.findChild<QPushButton*>("play");
    ASSERT_NE(play, nullptr);
    QTest::mouseClick(play, Qt::LeftButton);
    ASSERT_TRUE(wait_for([&] { return w.bridge()->max_step() >= 6; }, 30000)) << "Play generates";
    QTest::mouseClick(play, Qt::LeftButton);  // pause
    ASSERT_TRUE(wait_for([&] { return !w.bridge()->playing(); }, 5000));
    const int paused_at = w.bridge()->max_step();

    // A parameter change re-runs that column to the current step.
    auto* spin =
        w.findChild<QDoubleSpinBox*>(w.policy_param_widget_name("dkv-decode", "refresh_interval"));
    ASSERT_NE(spin, nullptr);
    spin->setValue(2);
    ASSERT_TRUE(wait_for(
        [&] {
            for (const auto& run : w.bridge()->snapshot())
                if (run.info.policy == "dkv-decode")
                    return run.info.policy_params.at("refresh_interval") == "2" &&
                           static_cast<int>(run.steps.size()) >= paused_at && !w.bridge()->busy();
            return false;
        },
        30000));
    for (const auto& run : w.bridge()->snapshot())
        EXPECT_GE(static_cast<int>(run.steps.size()), paused_at) << run.info.policy;

    // Screenshot: the canvas shows three columns with state colours and recompute colours.
    QTest::qWait(300);
    w.canvas()->update();
    QTest::qWait(300);
    const QImage img = w.grab().toImage();
    const QString out = QString::fromStdString((test::temp_dir("shot") / "window.png").string());
    ASSERT_TRUE(img.save(out));
    const QRect canvas(w.canvas()->mapTo(&w, QPoint(0, 0)), w.canvas()->size());
    const auto& pal = viz::palette(true);
    EXPECT_GT(count_color(img, canvas, rgb_of(pal.decoded_earlier)), 20)
        << "decoded tokens drawn (blue)";
    EXPECT_GT(count_color(img, canvas, rgb_of(pal.recomputed)), 20)
        << "recomputed rows drawn (orange)";
    // Each third of the canvas holds a column: every third has decoded tokens in it.
    for (int k = 0; k < 3; ++k) {
        QRect third(canvas.left() + k * canvas.width() / 3, canvas.top(), canvas.width() / 3,
                    canvas.height() / 3);
        EXPECT_GT(count_color(img, third, rgb_of(pal.decoded_earlier)), 5) << "column " << k;
    }
    EXPECT_LT(w.canvas()->last_frame_build_ms(), 200.0);

    // The drift probe is on by default and Run setup turns it off (new runs without it).
    const auto any_drift = [&] {
        for (const auto& run : w.bridge()->snapshot())
            for (const auto& s : run.steps)
                if (s->has_drift) return true;
        return false;
    };
    EXPECT_TRUE(any_drift());
    auto* drift = w.findChild<QCheckBox*>("drift_probe");
    ASSERT_NE(drift, nullptr);
    drift->setChecked(false);
    QTest::mouseClick(play, Qt::LeftButton);
    EXPECT_TRUE(wait_for([&] { return w.bridge()->max_step() >= 3 && !any_drift(); }, 30000))
        << "the restarted runs still carry the drift probe";
    QTest::mouseClick(play, Qt::LeftButton);
}

// Run setup > Kernels restarts the runs at the reference kernels: they name it, and their tokens
// are the fast kernels' (kernel_choice.h).
TEST(Gui, TheKernelsSettingRestartsTheRunsAtTheReferenceWithTheSameTokens) {
    auto o = tiny_model_options("What is 12 + 30?", {"none", "fast-dual"});
    MainWindow w(o);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    auto* kernels = w.findChild<QComboBox*>("kernels");
    ASSERT_NE(kernels, nullptr);
    const auto finals = [&](const std::string& set) {
        std::vector<std::vector<int32_t>> out;
        const auto& runs = w.source()->runs(w.view());
        for (const auto& run : runs) {
            if (!run.summary || run.info.kernels != set) return std::vector<std::vector<int32_t>>{};
            out.push_back(run.summary->final_tokens);
        }
        return out;
    };
    const auto finish_at = [&](int index, const std::string& set) {
        kernels->setCurrentIndex(index);
        emit kernels->activated(index);  // as a user's pick
        EXPECT_TRUE(wait_for(
            [&] {
                const auto& runs = w.source()->runs(w.view());
                return runs.size() == 2 && runs[0].info.kernels == set;
            },
            30000))
            << "the runs did not restart at " << set;
        w.advance_to(1 << 20);
        EXPECT_TRUE(wait_for([&] { return finals(set).size() == 2; }, 60000)) << set;
        return finals(set);
    };
    const auto fast = finish_at(0, "fast");
    const auto reference = finish_at(1, "reference");
    EXPECT_EQ(kernels->currentText(), "reference");
    ASSERT_EQ(fast.size(), 2u);
    EXPECT_EQ(fast, reference);
    (void)finish_at(0, "fast");  // the process-wide set back for the next tests
}

// A prompt that is a task item shows its expected answer and, when a run completes, the verdict
// (accuracy appeared nowhere in the app); other prompts show none.
TEST(Gui, ATaskItemPromptIsJudgedWhenItsRunCompletes) {
    auto o = tiny_model_options("What is 12 + 30?", {"none", "fast-dual"});
    MainWindow w(o);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    auto& before = w.source()->runs(w.view());
    ASSERT_EQ(before.size(), 2u);
    ASSERT_TRUE(before[0].answer.has_value());
    EXPECT_EQ(before[0].answer->expected, "42");
    EXPECT_FALSE(before[0].answer->complete);
    w.advance_to(1 << 20);
    ASSERT_TRUE(wait_for(
        [&] {
            const auto& runs = w.source()->runs(w.view());
            return runs.size() == 2 && runs[0].answer && runs[0].answer->complete &&
                   runs[1].answer && runs[1].answer->complete;
        },
        60000));
    for (const auto& run : w.source()->runs(w.view())) {
        const bool correct =
            tasks::exact_match(tasks::TaskItem{"arith", "", "", "42"}, run.summary->final_text);
        EXPECT_EQ(run.answer->correct, correct) << run.info.policy;
        EXPECT_EQ(run.answer->answered, tasks::extract_answer(run.summary->final_text));
    }
}

TEST(Gui, KeyboardStepsAndScrubs) {
    auto o = tiny_model_options("hi", {"none", "fast-dual"});
    MainWindow w(o);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    // Xvfb has no window manager, so no window is ever active and Qt delivers no shortcuts: press
    // the keys through the actions that own them (the same objects a user's key press triggers).
    auto press = [&](QKeySequence key) {
        for (auto* a : w.actions())
            if (a->shortcut() == key) {
                a->trigger();
                return true;
            }
        return false;
    };
    ASSERT_TRUE(press(Qt::Key_Right));
    ASSERT_TRUE(press(Qt::Key_Right));
    ASSERT_TRUE(press(Qt::Key_Right));
    ASSERT_TRUE(wait_for([&] { return w.bridge()->max_step() >= 3; }, 20000));
    QTest::qWait(200);  // let the canvas see the new steps
    ASSERT_TRUE(press(Qt::Key_Home));
    EXPECT_EQ(w.view().step, 0);
    ASSERT_TRUE(press(QKeySequence("Shift+Right")));
    ASSERT_TRUE(press(Qt::Key_End));
    EXPECT_EQ(w.view().step, -1);
    ASSERT_TRUE(press(Qt::Key_Space));
    EXPECT_TRUE(w.bridge()->playing());
    ASSERT_TRUE(press(Qt::Key_Space));
}

// One step cursor: a click in the scrubber's groove, a drag and the keys all move the view, and
// the transport label always names the step the canvas shows (counted from 0, as --step).
TEST(Gui, TheScrubberAndTheLabelFollowEverySeek) {
    auto o = tiny_model_options("hi", {"none"});
    MainWindow w(o);
    w.resize(1400, 900);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    w.advance_to(12);
    ASSERT_TRUE(
        wait_for([&] { return w.bridge()->max_step() >= 12 && !w.bridge()->busy(); }, 20000));
    QTest::qWait(200);
    auto* scrubber = w.findChild<QSlider*>("scrubber");
    auto* label = w.findChild<QLabel*>("step_label");
    ASSERT_NE(scrubber, nullptr);
    ASSERT_NE(label, nullptr);
    const int last = scrubber->maximum();
    ASSERT_GE(last, 11);
    // A click in the groove near the left end pages towards it: the view moves with the handle.
    QTest::mouseClick(scrubber, Qt::LeftButton, {}, QPoint(3, scrubber->height() / 2));
    EXPECT_LT(scrubber->value(), last);
    EXPECT_EQ(w.view().step, scrubber->value()) << "a click in the groove seeks";
    EXPECT_TRUE(label->text().startsWith(QString("step %1 / %2").arg(scrubber->value()).arg(last)))
        << label->text().toStdString();
    // A drag (the slider's tracking) seeks on every move.
    scrubber->setSliderDown(true);
    scrubber->setSliderPosition(5);
    scrubber->setSliderDown(false);
    EXPECT_EQ(w.view().step, 5);
    EXPECT_TRUE(label->text().startsWith(QString("step 5 / %1").arg(last)));
    // Seeks from elsewhere move the handle and the label.
    w.go_home();
    EXPECT_EQ(scrubber->value(), 0);
    EXPECT_TRUE(label->text().startsWith(QString("step 0 / %1").arg(last)));
    w.set_step(7);
    EXPECT_EQ(scrubber->value(), 7);
    w.go_end();
    EXPECT_EQ(scrubber->value(), last);
    EXPECT_TRUE(label->text().startsWith(QString("step %1 / %1").arg(last)));
}

// The Device selector lists the CPU and every CUDA device the runtime reports (name and memory);
// what cannot be used here stays listed, disabled, with the reason as its tooltip.
TEST(Gui, TheDeviceSelectorListsCudaDevicesOrSaysWhyNot) {
    const auto model = test::make_tiny_model("gui-device", 32, 1, 4, 4, 3);
    LaunchOptions o;
    o.model_dir = QFileInfo(QString::fromStdString(model.string())).absoluteFilePath();
    o.record = false;
    MainWindow w(o);
    auto* device = w.findChild<QComboBox*>("device");
    ASSERT_NE(device, nullptr);
    ASSERT_GE(device->count(), 2);
    EXPECT_EQ(device->itemData(0).toString(), "cpu");
    auto* items = qobject_cast<QStandardItemModel*>(device->model());
    ASSERT_NE(items, nullptr);
    const bool usable = cl::cuda_unavailable_reason().empty();
    for (int i = 1; i < device->count(); ++i) {
        EXPECT_TRUE(device->itemData(i).toString().startsWith("cuda"));
        EXPECT_EQ(items->item(i)->isEnabled(), usable) << device->itemText(i).toStdString();
        if (!usable) {
            EXPECT_FALSE(device->itemData(i, Qt::ToolTipRole).toString().isEmpty());
        }
    }
    if (!usable) GTEST_LOG_(INFO) << "no CUDA here: " << cl::cuda_unavailable_reason();
}

// Remembered generation settings survive a restart on the same model (the model's defaults
// overwrote them at every start); another model folder starts from its own defaults.
TEST(Gui, RememberedSettingsWinOverTheModelDefaultsForTheSameModel) {
    const auto model = test::make_tiny_model("gui-remember", 32, 1, 4, 4, 3);
    const QString dir = QFileInfo(QString::fromStdString(model.string())).absoluteFilePath();
    {
        QSettings s;
        s.setValue("gen_length", 48);
        s.setValue("block_length", 16);
        s.setValue("steps", 24);
        s.setValue("model_dir", dir);
    }
    LaunchOptions o;
    o.model_dir = dir;
    o.record = false;
    {
        MainWindow w(o);
        ASSERT_NE(w.bridge(), nullptr);
        EXPECT_EQ(w.findChild<QSpinBox*>("gen_length")->value(), 48);
        EXPECT_EQ(w.findChild<QSpinBox*>("block_length")->value(), 16);
        EXPECT_EQ(w.findChild<QSpinBox*>("steps")->value(), 24);
    }
    QSettings().setValue("model_dir", "/elsewhere");
    MainWindow other(o);
    EXPECT_NE(other.findChild<QSpinBox*>("gen_length")->value(), 48) << "the model's default";
    QSettings().remove("gen_length");
}

TEST(Gui, SaveReopenGivesIdenticalViews) {
    auto o = tiny_model_options("What is 1 + 2?", {"none", "dkv-decode"});
    o.record = true;
    MainWindow w(o);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    w.advance_to(6);
    ASSERT_TRUE(
        wait_for([&] { return w.bridge()->max_step() >= 6 && !w.bridge()->busy(); }, 20000));
    const auto live = w.bridge()->snapshot();
    const QString saved =
        QString::fromStdString((test::temp_dir("save") / "saved.clsession").string());
    ASSERT_EQ(w.save_session(saved).toStdString(), "");
    ASSERT_EQ(w.open_session(saved).toStdString(), "");
    ASSERT_TRUE(w.replaying());
    // The replayed columns hold the same records the live view showed (same panel data).
    // Reopen through the reader directly to compare record by record.
    trace::TraceStore store(false);
    sessions::SessionReader::open(saved.toStdString())->load_into(store);
    ASSERT_EQ(store.run_ids().size(), live.size());
    for (size_t c = 0; c < live.size(); ++c) {
        const auto steps = store.steps(store.run_ids()[c]);
        ASSERT_EQ(steps.size(), live[c].steps.size()) << live[c].info.policy;
        for (size_t t = 0; t < steps.size(); ++t) {
            EXPECT_EQ(steps[t]->tokens, live[c].steps[t]->tokens);
            EXPECT_EQ(steps[t]->actions, live[c].steps[t]->actions);
            EXPECT_EQ(steps[t]->states, live[c].steps[t]->states);
        }
    }
    // Engine controls are off in replay, and the transport still scrubs recorded steps.
    auto* play = w.findChild<QPushButton*>("play");
    EXPECT_FALSE(play->isEnabled());
    EXPECT_NE(play->toolTip().indexOf("replay"), -1);
    w.go_home();
    EXPECT_EQ(w.view().step, 0);
    w.step_forward();
    EXPECT_EQ(w.view().step, 1);
    // The setup dock shows the replayed runs' prompt and settings, read-only; the live values
    // come back with the live engine.
    auto* replay_setup = w.findChild<QLabel*>("replay_setup");
    auto* prompt = w.findChild<QPlainTextEdit*>("prompt");
    ASSERT_NE(replay_setup, nullptr);
    EXPECT_TRUE(replay_setup->isVisibleTo(&w));
    EXPECT_NE(replay_setup->text().indexOf("What is 1 + 2?"), -1)
        << replay_setup->text().toStdString();
    EXPECT_FALSE(prompt->isEnabled());
    w.back_to_live();
    EXPECT_FALSE(w.replaying());
    EXPECT_FALSE(replay_setup->isVisibleTo(&w));
    EXPECT_TRUE(prompt->isEnabled());
    EXPECT_TRUE(play->isEnabled());
}

// Recording keeps one comparison per Play and per slider re-run (the columns not re-run carry
// over) and a loop's last lap only; the replay offers every comparison, the Sessions dock lists
// them and the status bar names the file with its size. A minute of live use replayed as 73
// columns side by side before.
TEST(Gui, RecordingKeepsAComparisonPerPlayAndReRunAndALoopsLastLap) {
    auto o = tiny_model_options("hi", {"none", "dkv-decode"});
    o.record = true;
    MainWindow w(o);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    const QString path = w.recording_path();
    ASSERT_FALSE(path.isEmpty());
    auto finished = [&] {
        for (const auto& r : w.bridge()->snapshot())
            if (!r.summary) return false;
        return !w.bridge()->busy();
    };
    auto comparisons = [&] {
        EXPECT_EQ(w.bridge()->flush_recording(), "");
        return sessions::SessionReader::open(path.toStdString(), false)->comparisons();
    };
    w.advance_to(1 << 20);
    ASSERT_TRUE(wait_for(finished, 30000));
    const int32_t first_dkv = w.bridge()->snapshot()[1].info.run_id;
    auto* refresh =
        w.findChild<QDoubleSpinBox*>(w.policy_param_widget_name("dkv-decode", "refresh_interval"));
    ASSERT_NE(refresh, nullptr);
    refresh->setValue(refresh->value() + 1);
    ASSERT_TRUE(wait_for(
        [&] { return w.bridge()->snapshot()[1].info.run_id != first_dkv && finished(); }, 30000));
    auto c = comparisons();
    ASSERT_EQ(c.size(), 2u) << path.toStdString();
    EXPECT_EQ(c[1].run_ids[0], c[0].run_ids[0]) << "the none column carried over";
    EXPECT_NE(c[1].run_ids[1], c[0].run_ids[1]);
    // Three laps or more, then loop off: the last lap stays beside the Play and the re-run.
    auto* loop = w.findChild<QCheckBox*>("loop");
    loop->setChecked(true);
    ASSERT_TRUE(wait_for([&] { return w.bridge()->snapshot()[0].throughput.size() >= 4; }, 60000));
    loop->setChecked(false);
    ASSERT_TRUE(wait_for([&] { return !w.bridge()->playing() && finished(); }, 30000));
    c = comparisons();
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(sessions::SessionReader::open(path.toStdString(), false)->runs().size(), 5u);
    auto* recording = w.findChild<QLabel*>("recording");
    QTest::qWait(1100);  // refreshed every second
    EXPECT_NE(recording->text().indexOf(QFileInfo(path).fileName()), -1);
    EXPECT_NE(recording->text().indexOf("MB"), -1) << recording->text().toStdString();
    // The Sessions dock lists the three comparisons under the file.
    auto* browser = w.session_browser();
    browser->set_folder(QFileInfo(path).absolutePath());
    int row = -1;
    for (int r = 0; r < browser->row_count(); ++r)
        if (browser->path_at(r) == path) row = r;
    ASSERT_GE(row, 0);
    EXPECT_EQ(browser->comparison_count(row), 3);
    // The replay shows the latest and offers the others.
    ASSERT_EQ(w.open_session(path).toStdString(), "");
    auto* picker = w.findChild<QComboBox*>("replay_comparisons");
    ASSERT_NE(picker, nullptr);
    EXPECT_TRUE(picker->isVisibleTo(&w));
    ASSERT_EQ(picker->count(), 3);
    emit picker->activated(2);  // the oldest: the first Play
    ASSERT_TRUE(w.replaying());
    const auto& shown = w.source()->runs(w.view());
    ASSERT_EQ(shown.size(), 2u);
    EXPECT_EQ(shown[1].info.run_id, c[0].run_ids[1]);
    EXPECT_EQ(picker->currentIndex(), 2);
    // Recording off: the status bar says so and new runs go nowhere.
    w.back_to_live();
    auto* record = w.findChild<QAction*>("record");
    ASSERT_NE(record, nullptr);
    record->setChecked(false);
    EXPECT_TRUE(w.recording_path().isEmpty());
    EXPECT_EQ(recording->text(), "not recording");
    EXPECT_EQ(w.bridge()->flush_recording(), "");  // after the queued switch
    EXPECT_EQ(w.bridge()->recording_path(), "");
}

// A session folder that cannot be written (here: its parent is a file, which fails for root as
// well): the runs go on unrecorded, Record is unchecked, and the status bar says why, naming the
// file. (Permissions proper: Sessions.AReadOnlyFolderFailsWithTheFileNameAndDamagesNothing.)
// LLaDA and Dream side by side: every checked policy runs on both models, each column compared
// with its own model's none, the titles name model and architecture, the session records both
// architectures and a replay shows the same columns.
TEST(Gui, LladaAndDreamColumnsRunSideBySideLiveAndInReplay) {
    auto o = tiny_model_options("Reverse: 1 2 3", {"none", "dkv-decode"});
    ModelConfig dream = tiny_config(32, 2, 4, 2);
    set_architecture(dream, "dream");
    const auto dream_dir = test::temp_dir("gui-dream");
    init_random_model(dream_dir, dream, 5);
    o.also_model_dir = QString::fromStdString(dream_dir.string());
    o.record = true;
    MainWindow w(o);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    ASSERT_TRUE(w.startup_error().isEmpty()) << w.startup_error().toStdString();
    auto* also = w.findChild<QComboBox*>("also_model");
    ASSERT_NE(also, nullptr);
    const std::string llada_name = QFileInfo(o.model_dir).fileName().toStdString();
    const std::string dream_name = dream_dir.filename().string();
    EXPECT_EQ(also->currentText().toStdString(), dream_name);
    w.advance_to(1 << 20);
    const auto finished = [&] {
        const auto runs = w.bridge()->snapshot();
        for (const auto& r : runs)
            if (!r.summary) return false;
        return runs.size() == 4 && !w.bridge()->busy();
    };
    ASSERT_TRUE(wait_for(finished, 30000));
    const auto runs = w.bridge()->snapshot();
    std::vector<std::string> titles;
    for (const auto& r : runs) titles.push_back(viz::column_title(runs, r));
    EXPECT_EQ(titles,
              (std::vector<std::string>{
                  "none @" + llada_name + " (llada)", "dkv-decode @" + llada_name + " (llada)",
                  "none @" + dream_name + " (dream)", "dkv-decode @" + dream_name + " (dream)"}));
    EXPECT_EQ(viz::baseline_of(runs, runs[3])->info.run_id, runs[2].info.run_id)
        << "the Dream column is compared with Dream's none";

    ASSERT_EQ(w.bridge()->flush_recording(), "");
    const QString path = w.recording_path();
    auto reader = sessions::SessionReader::open(path.toStdString(), false);
    std::set<std::string> archs;
    for (const auto& r : reader->runs()) archs.insert(r.info.architecture);
    EXPECT_EQ(archs, (std::set<std::string>{"llada", "dream"}));
    ASSERT_EQ(w.open_session(path, false), "");
    std::vector<std::string> replayed;
    const auto& shown = w.source()->runs(w.view());
    for (const auto& r : shown) replayed.push_back(viz::column_title(shown, r));
    EXPECT_EQ(replayed, titles);

    // Removing the second model leaves the first model's columns.
    w.back_to_live();
    EXPECT_EQ(w.set_also_model(""), "");
    ASSERT_TRUE(wait_for([&] { return w.bridge()->snapshot().size() == 2; }, 10000));
    EXPECT_EQ(w.set_also_model("/nonexistent/model").isEmpty(), false);
}

TEST(Gui, AnUnwritableSessionFolderTurnsRecordingOffAndTheRunsGoOn) {
    const auto blocker = test::temp_dir("gui-ro") / "not-a-folder";
    test::write_file(blocker, "a file where the data folder should be");
    struct DataHome {  // restored however the test ends
        QByteArray saved = qgetenv("XDG_DATA_HOME");
        ~DataHome() {
            if (saved.isNull())
                qunsetenv("XDG_DATA_HOME");
            else
                qputenv("XDG_DATA_HOME", saved);
        }
    } data_home;
    qputenv("XDG_DATA_HOME", QByteArray::fromStdString(blocker.string()));
    auto o = tiny_model_options("hi", {"none", "dkv-decode"});
    o.record = true;
    MainWindow w(o);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    const QString path = w.recording_path();
    w.advance_to(1 << 20);
    ASSERT_TRUE(wait_for(
        [&] {
            const auto runs = w.bridge()->snapshot();
            return !w.bridge()->busy() && std::all_of(runs.begin(), runs.end(), [](const auto& r) {
                return r.summary.has_value();
            });
        },
        30000))
        << "the runs complete without a recording";
    const QString failure = QString::fromStdString(w.bridge()->recording_error());
    EXPECT_NE(failure.indexOf(path), -1) << failure.toStdString();
    EXPECT_NE(failure.indexOf("does not exist"), -1) << failure.toStdString();
    auto* recording = w.findChild<QLabel*>("recording");
    ASSERT_TRUE(wait_for([&] { return recording->text().startsWith("not recording:"); }, 3000))
        << recording->text().toStdString();
    EXPECT_EQ(recording->toolTip(), failure);
    EXPECT_FALSE(w.findChild<QAction*>("record")->isChecked());
    EXPECT_TRUE(w.recording_path().isEmpty());
    EXPECT_FALSE(QFileInfo::exists(path));
}

// A session, lesson or model given at start that does not open: a dialog naming the file once,
// the embedded model running instead, its controls usable (it was a dead window).
TEST(Gui, WhatFailsAtStartIsReportedAndTheEmbeddedModelRunsInstead) {
    for (const auto& [field, path] :
         std::vector<std::pair<QString, QString>>{{"session", "/nonexistent/x.clsession"},
                                                  {"lesson", "/nonexistent/lesson.json"},
                                                  {"model", "/nonexistent/model"}}) {
        LaunchOptions o;
        o.record = false;
        if (field == "session") o.session = path;
        if (field == "lesson") o.lesson = path;
        if (field == "model") o.model_dir = path;
        MainWindow w(o);
        const QString err = w.startup_error();
        EXPECT_NE(err.indexOf(path), -1) << field.toStdString() << ": " << err.toStdString();
        EXPECT_EQ(err.indexOf(path), err.lastIndexOf(path))
            << "the path twice: " << err.toStdString();
        auto* box = w.findChild<QMessageBox*>("startup_error");
        ASSERT_NE(box, nullptr) << field.toStdString();
        EXPECT_NE(box->text().indexOf("embedded default model"), -1) << box->text().toStdString();
        ASSERT_NE(w.bridge(), nullptr) << field.toStdString() << ": the fallback model";
        EXPECT_FALSE(w.replaying());
        EXPECT_TRUE(w.findChild<QPushButton*>("play")->isEnabled());
    }
}

// A large model folder loads on a worker thread: the window keeps drawing, a progress dialog
// counts tensors, Cancel keeps the model that runs, a folder that fails at start falls back to the
// embedded model. (The threshold is 0 here so the tiny model counts as large.)
TEST(Gui, ALargeModelLoadsInTheBackgroundAndCancelKeepsTheRunningOne) {
    auto o = tiny_model_options("hi", {"none"});
    o.background_load_bytes = 0;
    MainWindow w(o);
    EXPECT_EQ(w.bridge(), nullptr) << "the constructor returned before the weights were read";
    EXPECT_TRUE(w.loading_model());
    EXPECT_NE(w.findChild<QProgressDialog*>("model_loading"), nullptr);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    ASSERT_TRUE(wait_for([&] { return w.bridge() != nullptr; }, 20000));
    EXPECT_FALSE(w.loading_model());
    EXPECT_EQ(w.model_dir().toStdString(), o.model_dir.toStdString());
    w.advance_to(2);
    ASSERT_TRUE(
        wait_for([&] { return w.bridge()->max_step() >= 2 && !w.bridge()->busy(); }, 20000));

    // Cancel: the other folder never replaces the running model.
    const auto other = test::make_tiny_model("gui-other", 32, 2, 4, 4, 9);
    auto* bridge = w.bridge();
    w.open_model(QString::fromStdString(other.string()));
    auto* dialog = w.findChild<QProgressDialog*>("model_loading");
    ASSERT_NE(dialog, nullptr);
    auto* cancel = dialog->findChild<QPushButton*>();
    ASSERT_NE(cancel, nullptr);
    cancel->click();
    ASSERT_TRUE(wait_for([&] { return !w.loading_model(); }, 20000));
    EXPECT_EQ(w.model_dir().toStdString(), o.model_dir.toStdString());
    EXPECT_EQ(w.bridge(), bridge) << "the running engine was kept";
    EXPECT_NE(w.statusBar()->currentMessage().indexOf("cancelled"), -1)
        << w.statusBar()->currentMessage().toStdString();

    // Not cancelled: the other folder becomes the live model.
    w.open_model(QString::fromStdString(other.string()));
    ASSERT_TRUE(wait_for([&] { return !w.loading_model(); }, 20000));
    EXPECT_EQ(w.model_dir().toStdString(), other.string());
}

TEST(Gui, ALargeModelThatFailsInTheBackgroundAtStartFallsBackToTheEmbeddedModel) {
    const auto dir = test::make_tiny_model("gui-corrupt");
    for (const auto& f : std::filesystem::directory_iterator(dir))
        if (f.path().extension() == ".safetensors") std::filesystem::resize_file(f.path(), 100);
    auto o = tiny_model_options("hi", {"none"});
    o.model_dir = QString::fromStdString(dir.string());
    o.background_load_bytes = 0;
    MainWindow w(o);
    ASSERT_TRUE(
        wait_for([&] { return w.findChild<QMessageBox*>("startup_error") != nullptr; }, 20000));
    EXPECT_NE(w.startup_error().indexOf(".safetensors"), -1) << w.startup_error().toStdString();
    ASSERT_TRUE(wait_for([&] { return w.bridge() != nullptr && !w.loading_model(); }, 20000));
    EXPECT_EQ(w.model_dir().toStdString(), default_model_dir().string());
}

TEST(Gui, AClosedDockComesBackFromTheViewMenuAndLessonsHaveNext) {
    MainWindow w(tiny_model_options("hi", {"none"}));
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    auto* dock = w.findChild<QDockWidget*>("policies");
    ASSERT_NE(dock, nullptr);
    dock->close();
    EXPECT_FALSE(dock->isVisible());
    QAction* toggle = nullptr;
    for (auto* menu : w.findChildren<QMenu*>())
        if (menu->title() == "&Docks")
            for (auto* a : menu->actions())
                if (a == dock->toggleViewAction()) toggle = a;
    ASSERT_NE(toggle, nullptr) << "View > Docks lists the policies dock";
    toggle->trigger();
    EXPECT_TRUE(dock->isVisible());
    auto* next = w.findChild<QAction*>("lesson_next");
    ASSERT_NE(next, nullptr);
    ASSERT_EQ(w.start_lesson(MainWindow::bundled_lessons().front()).toStdString(), "");
    const int before = w.lesson_index();
    next->trigger();
    EXPECT_EQ(w.lesson_index(), before + 1);
}

// A long advance says which column is how far with the time left, and Cancel says what it
// stopped ("(re-running)" said neither, and Cancel gave no feedback).
TEST(Gui, ALongAdvanceSaysHowFarAndCancelSaysWhatItStopped) {
    MainWindow w(tiny_model_options("hi", {"none"}));
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    w.findChild<QSpinBox*>("gen_length")->setValue(1024);
    w.findChild<QSpinBox*>("block_length")->setValue(1024);
    w.findChild<QSpinBox*>("steps")->setValue(1024);
    w.apply_setup();
    w.advance_to(1024);
    std::string work;
    ASSERT_TRUE(wait_for(
        [&] {
            work = w.bridge()->work();
            return work.find("s left") != std::string::npos;
        },
        30000));
    EXPECT_EQ(work.rfind("none: step ", 0), 0u) << work;
    EXPECT_NE(work.find(" of 1024 ("), std::string::npos) << work;
    auto* cancel = w.findChild<QPushButton*>("cancel");
    ASSERT_TRUE(wait_for([&] { return cancel->isEnabled(); }, 5000));
    EXPECT_NE(w.findChild<QLabel*>("step_label")->text().indexOf("running none: step"), -1)
        << w.findChild<QLabel*>("step_label")->text().toStdString();
    QTest::mouseClick(cancel, Qt::LeftButton);
    ASSERT_TRUE(wait_for([&] { return !w.bridge()->busy(); }, 10000));
    EXPECT_TRUE(w.statusBar()->currentMessage().startsWith("Cancelled none: step "))
        << w.statusBar()->currentMessage().toStdString();
    EXPECT_LT(w.bridge()->max_step(), 1024);
    EXPECT_EQ(w.bridge()->work(), "");
}

// Workshop mode: presenter mode hides every dock but the transport and brings the same ones back;
// a lesson turns it on while it runs; text zoom is remembered across windows.
// At 1280x720 the Policies dock is a tab beside Run setup and the canvas keeps most of the width
// (it had ~470 of 1280 px: two of three columns); at 1920x1080 Policies is on the right; the
// layout follows a resize across the line.
TEST(Gui, DocksMakeRoomForTheCanvasInASmallWindow) {
    MainWindow w(tiny_model_options("hi", {"none", "dkv-decode", "elastic"}));
    auto* setup = w.findChild<QDockWidget*>("setup");
    auto* policies = w.findChild<QDockWidget*>("policies");
    ASSERT_NE(setup, nullptr);
    ASSERT_NE(policies, nullptr);
    w.resize(1280, 720);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    ASSERT_TRUE(wait_for([&] { return w.compact_docks() && w.canvas()->width() > 900; }, 5000))
        << "canvas " << w.canvas()->width() << " px of 1280; setup " << setup->width() << " min "
        << setup->minimumSizeHint().width() << " policies min "
        << policies->minimumSizeHint().width();
    EXPECT_TRUE(w.tabifiedDockWidgets(setup).contains(policies));
    EXPECT_EQ(w.dockWidgetArea(policies), Qt::LeftDockWidgetArea);
    w.resize(1920, 1080);
    ASSERT_TRUE(
        wait_for([&] { return w.dockWidgetArea(policies) == Qt::RightDockWidgetArea; }, 5000));
    EXPECT_FALSE(w.compact_docks());
    EXPECT_TRUE(policies->isVisible());
    EXPECT_TRUE(setup->isVisible());
    ASSERT_TRUE(wait_for([&] { return w.canvas()->width() > 1100; }, 5000))
        << "canvas " << w.canvas()->width() << " px of 1920";
}

TEST(Gui, PresenterModeAndLessonsGiveTheCanvasTheWindowAndZoomIsRemembered) {
    MainWindow w(tiny_model_options("hi", {"none"}));
    w.resize(1280, 720);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    auto* policies = w.findChild<QDockWidget*>("policies");
    auto* transport = w.findChild<QDockWidget*>("transport");
    const int canvas_before = w.canvas()->width();
    w.set_presenter(true);
    QTest::qWait(50);
    EXPECT_FALSE(policies->isVisible());
    EXPECT_TRUE(transport->isVisible());
    EXPECT_GT(w.canvas()->width(), canvas_before + 200) << "the canvas takes the docks' width";
    w.set_presenter(false);
    EXPECT_TRUE(policies->isVisible());
    ASSERT_EQ(w.start_lesson(MainWindow::bundled_lessons().front()).toStdString(), "");
    EXPECT_TRUE(w.presenter());
    EXPECT_FALSE(policies->isVisible());
    w.end_lesson();
    EXPECT_FALSE(w.presenter());
    EXPECT_TRUE(policies->isVisible());
    w.zoom(1);
    const double zoomed = w.canvas()->font_scale();
    EXPECT_GT(zoomed, 1.1);
    MainWindow again(tiny_model_options("hi", {"none"}));
    EXPECT_DOUBLE_EQ(again.canvas()->font_scale(), zoomed);
    again.zoom(0);
    EXPECT_DOUBLE_EQ(again.canvas()->font_scale(), 1.0);
}

TEST(Gui, BadSessionFilesGiveAMessageNotACrash) {
    LaunchOptions o;
    o.model_dir = QString::fromStdString(test::make_tiny_model("gui", 32, 1, 4, 4, 3).string());
    o.record = false;
    MainWindow w(o);
    const auto dir = test::temp_dir("bad");
    test::write_file(dir / "junk.clsession", std::string(8192, 'j'));
    QString err = w.open_session(QString::fromStdString((dir / "junk.clsession").string()));
    EXPECT_NE(err.indexOf("junk.clsession"), -1) << err.toStdString();
    EXPECT_FALSE(w.replaying());
    {
        auto writer = sessions::SessionWriter::open((dir / "newer.clsession").string());
        writer->flush();
    }
    {
        sessions::Db db((dir / "newer.clsession").string(), SQLITE_OPEN_READWRITE);
        db.exec("PRAGMA user_version = 42");
    }
    err = w.open_session(QString::fromStdString((dir / "newer.clsession").string()));
    EXPECT_NE(err.indexOf("newer CacheLens"), -1) << err.toStdString();
    EXPECT_FALSE(w.replaying());
}

TEST(Gui, SessionBrowserListsAndOpensSessions) {
    MainWindow w(tiny_model_options("hi", {"none"}));
    const auto dir = test::temp_dir("browser");
    // One real session (written by the lesson script's recorder) and one junk file.
    const auto lesson = MainWindow::bundled_lessons().front();
    const auto src = QString::fromStdString(viz::load_lesson(lesson.toStdString()).session);
    QFile::copy(src, QString::fromStdString((dir / "good.clsession").string()));
    test::write_file(dir / "junk.clsession", std::string(4096, 'x'));
    auto* browser = w.session_browser();
    browser->set_folder(QString::fromStdString(dir.string()));
    ASSERT_EQ(browser->row_count(), 2);
    auto* table = browser->findChild<QTreeWidget*>("sessions");
    bool saw_unreadable = false, saw_policies = false;
    for (int r = 0; r < 2; ++r) {
        saw_unreadable |= table->topLevelItem(r)->text(3).startsWith("unreadable");
        saw_policies |= table->topLevelItem(r)->text(4).contains("none");
    }
    EXPECT_TRUE(saw_unreadable);
    EXPECT_TRUE(saw_policies);
    // A double-click on the good row opens it (it did nothing; only the Open button did).
    EXPECT_FALSE(w.replaying());
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    auto* dock = w.findChild<QDockWidget*>("sessions");
    ASSERT_NE(dock, nullptr);
    dock->raise();  // tabbed behind Run setup
    QTest::qWait(50);
    ASSERT_TRUE(table->isVisible());
    ASSERT_EQ(browser->row_count(), 2);  // raising the dock keeps the folder it was showing
    for (int r = 0; r < 2; ++r) {
        if (!browser->path_at(r).endsWith("good.clsession")) continue;
        EXPECT_EQ(browser->comparison_count(r), 1);
        table->setCurrentItem(table->topLevelItem(r));
        // The row's rectangle spans every column, wider than a narrow dock: click inside view.
        const QRect row = table->visualItemRect(table->topLevelItem(r));
        const QRect cell(row.left(), row.top(), table->viewport()->width() / 2, row.height());
        // A real double-click is a press, a release and a double-click event on the same cell;
        // QTest's mouseDClick alone leaves the view without its pressed cell.
        QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, cell.center());
        QTest::mouseDClick(table->viewport(), Qt::LeftButton, {}, cell.center());
    }
    EXPECT_TRUE(w.replaying());
}

TEST(Gui, PresetsSetEveryPolicyAtOnce) {
    MainWindow w(tiny_model_options("hi", {"none"}));
    auto* combo = w.findChildren<QComboBox*>().front();
    for (auto* c : w.findChildren<QComboBox*>())
        if (c->itemText(0).startsWith("Preset")) combo = c;
    ASSERT_TRUE(combo->itemText(0).startsWith("Preset"));
    auto* refresh =
        w.findChild<QDoubleSpinBox*>(w.policy_param_widget_name("dkv-decode", "refresh_interval"));
    auto* gamma = w.findChild<QDoubleSpinBox*>(w.policy_param_widget_name("elastic", "gamma"));
    combo->activated(1);
    EXPECT_EQ(refresh->value(), 1);
    EXPECT_EQ(gamma->value(), 1.0);
    combo->activated(0);
    EXPECT_EQ(refresh->value(), 8);
    EXPECT_DOUBLE_EQ(gamma->value(), 0.9);
}

TEST(Gui, EveryBundledLessonStepsThroughToTheEndWithSpace) {
    const auto lessons = MainWindow::bundled_lessons();
    ASSERT_GE(lessons.size(), 3);
    MainWindow w(tiny_model_options("hi", {"none"}));  // lessons replay their own sessions
    w.show();
    for (const auto& path : lessons) {
        SCOPED_TRACE(path.toStdString());
        ASSERT_EQ(w.start_lesson(path).toStdString(), "");
        ASSERT_TRUE(w.in_lesson());
        const auto lesson = viz::load_lesson(path.toStdString());
        int steps = 1;
        // Space (the Play action) advances a running lesson.
        QAction* space = nullptr;
        for (auto* a : w.actions())
            if (a->shortcut() == QKeySequence(Qt::Key_Space)) space = a;
        ASSERT_NE(space, nullptr);
        while (true) {
            const auto& st = lesson.steps[static_cast<size_t>(w.lesson_index())];
            EXPECT_EQ(w.view().step, st.step);
            EXPECT_EQ(w.view().highlight, st.panels);
            // What the step's text points at is on screen in its session.
            for (const auto& check : st.checks)
                EXPECT_EQ(viz::evaluate_lesson_check(check, w.source()->runs(w.view()), st.step),
                          "")
                    << "lesson step " << w.lesson_index() + 1 << " '" << st.title << "' ("
                    << check.kind << ")";
            w.canvas()->update();
            QTest::qWait(30);
            const int before = w.lesson_index();
            space->trigger();
            if (w.lesson_index() == before) break;
            ++steps;
        }
        EXPECT_EQ(steps, static_cast<int>(lesson.steps.size()));
        size_t checked = 0;
        for (const auto& st : lesson.steps) checked += st.checks.size();
        EXPECT_GT(checked, 0u) << "the lesson says what its steps show";
        w.end_lesson();
        EXPECT_FALSE(w.in_lesson());
    }
    // Back to the live engine ends a lesson running over its replay (its banner and Space-advance
    // stayed over the live runs).
    ASSERT_EQ(w.start_lesson(lessons.front()).toStdString(), "");
    w.back_to_live();
    EXPECT_FALSE(w.in_lesson());
    EXPECT_TRUE(w.view().lesson_banner.empty());
}

// A sweep results file (a real SQLite file, written through the store the CLI uses) opened in
// the window: running one of its points puts that point's policy, parameters, sampler settings
// and first task item into the docks and runs it beside none.
TEST(Gui, AParetoPointRunsWithItsParametersBesideNone) {
    const auto model = test::make_tiny_model("gui", 32, 2, 4, 4, 3);
    const std::string spec =
        R"({"format":"cachelens-sweep","version":1,"sampler":{"gen_length":16,"block_length":8,)"
        R"("steps":16,"temperature":0,"seed":5},"tasks":{"families":["reverse"],"items":1,"seed":3}})";
    const auto file = (test::temp_dir("gui-sweep") / "results.clsweep").string();
    {
        auto store = sweep::SweepStore::create_or_resume(file, spec, 2);
        for (const auto& [index, policy, params] :
             std::vector<std::tuple<int, std::string, std::map<std::string, double>>>{
                 {0, "none", {}},
                 {1, "dkv-decode", {{"refresh_interval", 3}, {"delay", 1}, {"block_reset", 0}}}}) {
            sweep::PointResult p;
            p.index = index;
            p.model = "default";
            p.policy = policy;
            p.params = params;
            p.key = sweep::point_key(p.model, p.device, p.policy, p.params);
            p.items.push_back({"reverse", 0, true, 4, 10.0, 1e6, 2e6, 8, {}});
            store->add_point(p);
        }
    }
    LaunchOptions o;
    o.model_dir = QString::fromStdString(model.string());
    o.policies = {"none", "elastic"};
    o.record = false;
    MainWindow w(o);
    w.resize(1400, 900);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    ASSERT_EQ(w.open_sweep(QString::fromStdString(file)).toStdString(), "");
    w.canvas()->update();
    QTest::qWait(50);
    w.run_pareto_point(1);

    const auto checked = [&](const char* policy) {
        auto* box = w.findChild<QCheckBox*>(QString("policy/") + policy);
        return box && box->isChecked();
    };
    EXPECT_TRUE(checked("none"));
    EXPECT_TRUE(checked("dkv-decode"));
    EXPECT_FALSE(checked("elastic"));
    auto* interval =
        w.findChild<QDoubleSpinBox*>(w.policy_param_widget_name("dkv-decode", "refresh_interval"));
    ASSERT_NE(interval, nullptr);
    EXPECT_EQ(interval->value(), 3);
    tasks::TaskGenerator gen(3, tasks::Split::Eval);
    const std::string first_item = gen.next("reverse").prompt;
    ASSERT_TRUE(wait_for(
        [&] {
            const auto runs = w.bridge()->snapshot();
            if (runs.size() != 2) return false;
            for (const auto& run : runs)
                if (run.info.policy == "dkv-decode")
                    return run.info.policy_params.at("refresh_interval") == "3" &&
                           run.info.policy_params.at("block_reset") == "0" &&
                           run.info.gen_len == 16 && run.info.steps == 16 && run.info.seed == 5 &&
                           run.info.prompt_text == first_item;
            return false;
        },
        30000))
        << "the point's policy, parameters, sampler and first task item run beside none";
}

}  // namespace
}  // namespace cl::app

int main(int argc, char** argv) {
    QSurfaceFormat fmt;
    fmt.setVersion(3, 3);
    fmt.setProfile(QSurfaceFormat::CoreProfile);
    QSurfaceFormat::setDefaultFormat(fmt);
    QApplication app(argc, argv);
    QApplication::setOrganizationName("CacheLensTests");  // keep the user's settings untouched
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

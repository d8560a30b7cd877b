// Every panel through ImGui's null backend (no GL) with extreme inputs: 0 steps, 1 token, 4096
// tokens, NaN values. A texture provider records what the panels asked for, so the tests check
// content, not just "did not crash".
#include <gtest/gtest.h>

#include <imgui.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <map>

#include "engine/trace/drift_analysis.h"
#include "viz/lesson.h"
#include "viz/palette.h"
#include "viz/panels/panels.h"
#include "viz/text_fit.h"
#include "viz/viz_context.h"

namespace cl::viz {
namespace {

class RecordingTextures final : public TextureProvider {
public:
    ImTextureID scalar_texture(const std::string& key, int w, int h, const std::vector<float>& v,
                               float lo, float hi, Colormap) override {
        EXPECT_EQ(v.size(), static_cast<size_t>(w) * static_cast<size_t>(h)) << key;
        EXPECT_LE(lo, hi);
        keys.push_back(key);
        return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(keys.size()));
    }
    ImTextureID rgba_texture(const std::string& key, int w, int h,
                             const std::vector<uint32_t>& px) override {
        EXPECT_EQ(px.size(), static_cast<size_t>(w) * static_cast<size_t>(h)) << key;
        keys.push_back(key);
        sizes[key] = {w, h};
        last_rgba = px;
        return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(keys.size()));
    }
    std::vector<std::string> keys;
    std::map<std::string, std::pair<int, int>> sizes;  // rgba textures: (width, height)
    std::vector<uint32_t> last_rgba;
};

struct ImGuiNull {
    ImGuiNull() {
        ctx = ImGui::CreateContext();
        ImGuiIO& io = ImGui::GetIO();
        io.DisplaySize = {1600, 1000};
        io.IniFilename = nullptr;
        unsigned char* px;
        int w, h;
        io.Fonts->GetTexDataAsRGBA32(&px, &w,
                                     &h);  // the null backend: build the atlas, upload nothing
    }
    ~ImGuiNull() { ImGui::DestroyContext(ctx); }
    template <typename F>
    void frame(F&& body) {
        ImGui::NewFrame();
        ImGui::SetNextWindowPos({0, 0});
        ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
        ImGui::Begin("canvas");
        body();
        ImGui::End();
        ImGui::Render();
        ASSERT_NE(ImGui::GetDrawData(), nullptr);
    }
    ImGuiContext* ctx;
};

RunView make_run(const std::string& policy, int32_t L, int32_t steps, int32_t N = 4,
                 bool nan = false) {
    RunView r;
    r.info.run_id = policy == "none" ? 0 : 1;
    r.info.policy = policy;
    r.info.prompt_len = std::min(L, 4);
    r.info.gen_len = L - r.info.prompt_len;
    r.info.n_layers = N;
    r.info.n_heads = 2;
    r.info.eos_id = -5;
    r.info.steps = steps;
    for (int32_t t = 0; t < steps; ++t) {
        auto s = std::make_shared<trace::StepRecord>();
        s->run_id = r.info.run_id;
        s->step = t;
        s->seq_len = L;
        s->n_layers = N;
        for (int32_t i = 0; i < L; ++i) {
            s->tokens.push_back(i % 7);
            s->states.push_back(i < r.info.prompt_len        ? trace::TokenState::Prompt
                                : i - r.info.prompt_len < t  ? trace::TokenState::DecodedEarlier
                                : i - r.info.prompt_len == t ? trace::TokenState::DecodedNow
                                                             : trace::TokenState::Masked);
            s->predicted.push_back(3);
            s->confidence.push_back(nan ? NAN : 0.5f);
        }
        s->committed = {std::min(L - 1, r.info.prompt_len + t)};
        for (int32_t k = 0; k < N * L; ++k) {
            s->actions.push_back(static_cast<trace::RowAction>(k % 5));
            s->cache_age.push_back(static_cast<uint16_t>(k % 40));
        }
        s->wall_ms = nan ? NAN : 2.0;
        s->flops = 1e6;
        s->flops_full = 3e6;
        trace::TriggerEvent e;
        e.kind = "drift";
        e.layer = t % N;
        e.value = nan ? NAN : 0.8 + 0.01 * t;
        e.threshold = 0.9;
        e.fired = t % 3 == 0;
        s->triggers.push_back(e);
        trace::AttentionMap a;
        a.layer = 0;
        a.head = -1;
        a.rows = std::min(L, 3);
        a.cols = L;
        for (int32_t q = 0; q < a.rows; ++q) a.row_index.push_back(q);
        const std::vector<float> probs(static_cast<size_t>(a.rows) * static_cast<size_t>(L),
                                       nan ? NAN : 1.f / static_cast<float>(L));
        a.set_probs(probs.data());
        s->attention.push_back(a);
        r.steps.push_back(s);
        r.throughput.push_back(nan ? NAN : 10.f + t);
    }
    r.token_text = {{0, "a"}, {1, "b"}, {3, "c"}};
    return r;
}

void draw_all(std::vector<RunView>& runs, ViewState& view, RecordingTextures& tex) {
    ImGuiNull imgui;
    imgui.frame([&] { draw_canvas(runs, view, tex); });
    imgui.frame(
        [&] { draw_canvas(runs, view, tex); });  // a second frame exercises hover/cached paths
}

// The shared zoom window, clipped to each panel's own axis (the timeline starts near the prompt's
// end, the recompute map at position 0), maps positions and texture coordinates consistently.
TEST(Viz, ThePositionZoomIsClippedToEachPanelsAxis) {
    ViewState v;
    auto whole = position_axis(v, 0, 1280);
    EXPECT_FALSE(whole.zoomed);
    EXPECT_EQ(whole.at(0.f), 0);
    EXPECT_EQ(whole.at(1.f), 1279);
    v.zoom_first = 230;
    v.zoom_count = 96;
    const auto map = position_axis(v, 0, 1280);
    EXPECT_TRUE(map.zoomed);
    EXPECT_EQ(map.first, 230);
    EXPECT_EQ(map.count, 96);
    EXPECT_FLOAT_EQ(map.u0, 230.f / 1280);
    EXPECT_FLOAT_EQ(map.u1, 326.f / 1280);
    EXPECT_EQ(map.at(0.5f), 278);
    EXPECT_FLOAT_EQ(map.fraction_of(278.f), 0.5f);
    const auto timeline = position_axis(v, 252, 1028);  // positions 252..1279
    EXPECT_EQ(timeline.first, 252);
    EXPECT_EQ(timeline.count, 74);
    EXPECT_FLOAT_EQ(timeline.u0, 0.f);
    EXPECT_FLOAT_EQ(timeline.u1, 74.f / 1028);
    v.zoom_first = 2000;  // outside the axis: the whole axis
    EXPECT_FALSE(position_axis(v, 0, 1280).zoomed);
}

TEST(Viz, EmptyCanvasSaysWhatToDo) {
    std::vector<RunView> runs;
    ViewState view;
    RecordingTextures tex;
    draw_all(runs, view, tex);
    EXPECT_TRUE(tex.keys.empty());
}

TEST(Viz, ZeroStepsDrawsHeadersOnly) {
    std::vector<RunView> runs{make_run("none", 16, 0), make_run("elastic", 16, 0)};
    ViewState view;
    RecordingTextures tex;
    draw_all(runs, view, tex);
    EXPECT_TRUE(tex.keys.empty());
    EXPECT_EQ(view.steps_available, 0);
}

TEST(Viz, OneTokenSequence) {
    std::vector<RunView> runs{make_run("none", 1, 1, 1)};
    ViewState view;
    RecordingTextures tex;
    draw_all(runs, view, tex);
    EXPECT_FALSE(tex.keys.empty());
}

TEST(Viz, UniformNoiseRunsDrawWithChangeCountsAtEveryStep) {
    // A uniform run revises positions: every step changes the first response position again.
    std::vector<RunView> runs{make_run("none", 20, 6, 2), make_run("block-cache", 20, 6, 2)};
    for (auto& r : runs) {
        r.info.noise_process = "uniform";
        r.info.block_len = 8;
        for (auto& s : r.steps) {
            auto copy = std::make_shared<trace::StepRecord>(*s);
            copy->committed.push_back(r.info.prompt_len);
            copy->has_drift = copy->step > 0;  // the probe's arrays: NaN where not computed
            const auto NL = static_cast<size_t>(copy->n_layers * copy->seq_len);
            for (size_t k = 0; k < NL; ++k) {
                const float v = k % 3 == 0 ? NAN : 0.01f * static_cast<float>(k % 7);
                copy->drift.k_cos.push_back(1.f - v);
                copy->drift.v_cos.push_back(1.f - v);
                copy->drift.k_rel_l2.push_back(v);
                copy->drift.v_rel_l2.push_back(2 * v);
            }
            s = copy;
        }
    }
    ViewState view;
    view.pinned_pos = runs[0].info.prompt_len;
    for (int step : {0, 3, 5}) {
        view.step = step;
        RecordingTextures tex;
        draw_all(runs, view, tex);
    }
    const trace::StepList all(runs[0].steps.begin(), runs[0].steps.end());
    // Committed at every step by the test, and once more at step 0 by make_run.
    EXPECT_EQ(trace::change_counts(runs[0].info, all)[0], 7);
}

TEST(Viz, LongSequenceFourColumns) {
    std::vector<RunView> runs{make_run("none", 4096, 3), make_run("dkv-decode", 4096, 3),
                              make_run("elastic", 4096, 3), make_run("fast-dual", 4096, 3)};
    ViewState view;
    RecordingTextures tex;
    draw_all(runs, view, tex);
    int attention = 0;
    for (const auto& k : tex.keys) attention += k.rfind("attn/", 0) == 0;
    EXPECT_EQ(attention, 8) << "one attention texture per column per frame";
    EXPECT_EQ(view.steps_available, 3);
    // The token strip wraps into rows of cells a few pixels wide (it was one row of 4096
    // sub-pixel cells where no token could be picked).
    int strips = 0;
    for (const auto& [key, size] : tex.sizes) {
        if (key.rfind("strip/", 0) != 0) continue;
        ++strips;
        const auto [w, h] = size;
        EXPECT_GT(h, 1) << key;
        EXPECT_GE(w * h, 4096) << key;  // every position has a cell
        EXPECT_LE(w, 1600 / 4 / 4) << key << ": cells of at least 4 px in a quarter of 1600 px";
    }
    EXPECT_GT(strips, 0);
}

TEST(Viz, D2CacheColumnsShowTheRollout) {
    std::vector<RunView> runs{
        make_run("d2cache", 24, 3, 1)};  // one layer: the rollout is computable
    ViewState view;
    RecordingTextures tex;
    draw_all(runs, view, tex);
    EXPECT_FALSE(tex.keys.empty());
}

TEST(Viz, NanValuesAreSkippedNotDrawn) {
    std::vector<RunView> runs{make_run("none", 32, 5, 2, true),
                              make_run("dllm-cache", 32, 5, 2, true)};
    ViewState view;
    view.oracle_view = true;
    RecordingTextures tex;
    draw_all(runs, view, tex);
    view.oracle_view = false;
    draw_all(runs, view, tex);
    const auto m = column_metrics(runs[1], &runs[0], -1);
    EXPECT_TRUE(std::isnan(m.tokens_per_s) || m.tokens_per_s >= 0);
}

TEST(Viz, InspectorFollowsAPinnedPositionAcrossColumns) {
    std::vector<RunView> runs{make_run("none", 16, 6, 3), make_run("elastic", 16, 6, 3, true)};
    for (auto& r : runs)
        for (auto& s : r.steps) {
            auto copy = std::make_shared<trace::StepRecord>(*s);
            copy->topk_ids.assign(16 * trace::StepRecord::kTopK, 1);
            copy->topk_probs.assign(16 * trace::StepRecord::kTopK, 0.2f);
            copy->entropy.assign(16, 1.5f);
            copy->margin.assign(16, 0.1f);
            s = copy;
        }
    ViewState view;
    view.pinned_pos = 6;
    RecordingTextures tex;
    draw_all(runs, view, tex);
    view.pinned_pos = 4095;  // beyond the sequence: "no data", no crash
    draw_all(runs, view, tex);
    EXPECT_EQ(view.pinned_pos, 4095);
}

TEST(Viz, LessonFilesAreValidatedWithClearErrors) {
    const auto dir = std::filesystem::temp_directory_path() / "cachelens-lesson-test";
    std::filesystem::create_directories(dir);
    auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream(dir / name) << text;
        return (dir / name).string();
    };
    auto ok =
        load_lesson(write("ok.lesson.json", R"({"title": "T", "session": "s.clsession", "steps": [
        {"title": "a", "text": "b", "step": 3, "panels": ["recompute"], "annotations": [{"step": 3, "position": 9, "text": "x"}]}]})"));
    EXPECT_EQ(ok.steps.size(), 1u);
    EXPECT_EQ(ok.session, (dir / "s.clsession").string());
    EXPECT_EQ(ok.steps[0].annotations[0].position, 9);
    for (
        const auto& [name, text, fragment] :
        std::vector<std::tuple<std::string, std::string, std::string>>{
            {"bad.json", "{", "invalid JSON"},
            {"nosteps.json", R"({"title": "T", "session": "s", "steps": []})", "at least one step"},
            {"panel.json",
             R"({"title": "T", "session": "s", "steps": [{"title": "a", "text": "b", "panels": ["nope"]}]})",
             "unknown panel"},
            {"missing.json", R"({"session": "s", "steps": []})", "malformed"},
            // fuzz_lesson: a step number no int holds was cast (undefined behaviour).
            {"huge.json",
             R"({"title": "T", "session": "s", "steps": [{"title": "a", "text": "b", "step": -8.9e67}]})",
             "expected an integer"},
            {"fraction.json",
             R"({"title": "T", "session": "s", "steps": [{"title": "a", "text": "b", "layer": 1.5}]})",
             "expected an integer"}}) {
        try {
            load_lesson(write(name, text));
            FAIL() << name;
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        }
    }
    // The fuzzer's own input, checked in.
    const auto found = std::filesystem::path(CL_SOURCE_DIR) / "tests/data/fuzz/fuzz_lesson";
    for (const auto& entry : std::filesystem::directory_iterator(found))
        EXPECT_THROW(load_lesson(entry.path().string()), std::runtime_error) << entry.path();
}

TEST(Viz, TimelineColoursFollowStates) {
    std::vector<RunView> runs{make_run("none", 12, 4, 2)};
    ViewState view;
    RecordingTextures tex;
    ImGuiNull imgui;
    imgui.frame([&] {
        ColumnContext c{runs[0], nullptr, view, tex, 3, 400.f};
        draw_timeline(c);
    });
    ASSERT_EQ(tex.last_rgba.size(), static_cast<size_t>(4 * 12));
    // Row 0 (step 0), first response position (4): decoded now.
    EXPECT_EQ(tex.last_rgba[4], state_color(trace::TokenState::DecodedNow, true));
    EXPECT_EQ(tex.last_rgba[0], state_color(trace::TokenState::Prompt, true));
}

TEST(Viz, LessonAnnotationsAreDrawnAtTheirStepOnly) {
    std::vector<RunView> runs{make_run("none", 12, 6, 3)};
    RecordingTextures tex;
    // Vertices the token strip and the recompute map draw at step 3 with these annotations.
    auto vertices = [&](std::vector<Annotation> notes) {
        ViewState view;
        view.step = 3;
        view.annotations = std::move(notes);
        ImGuiNull imgui;
        int count = 0;
        imgui.frame([&] {
            ColumnContext c{runs[0], nullptr, view, tex, 3, 400.f};
            draw_token_strip(c);
            draw_recompute_map(c);
        });
        count = ImGui::GetDrawData()->TotalVtxCount;
        return count;
    };
    const int plain = vertices({});
    EXPECT_GT(vertices({{3, 6, 1, "here"}}), plain);   // the step shown
    EXPECT_GT(vertices({{-1, 6, -1, "any"}}), plain);  // every step
    EXPECT_EQ(vertices({{2, 6, 1, "not now"}}), plain);
    EXPECT_EQ(vertices({{3, 500, 1, "outside"}}), plain);  // beyond the sequence: skipped
}

TEST(Viz, MetricsAgainstTheBaseline) {
    auto base = make_run("none", 12, 4);
    auto run = make_run("dkv-decode", 12, 4);
    for (auto& s : run.steps) {
        auto copy = std::make_shared<trace::StepRecord>(*s);
        copy->wall_ms = 1.0;
        copy->flops = 0.5e6;
        s = copy;
    }
    const auto m = column_metrics(run, &base, -1);
    EXPECT_DOUBLE_EQ(m.speedup, 2.0);
    EXPECT_DOUBLE_EQ(m.flop_ratio, 2.0);
    EXPECT_DOUBLE_EQ(m.efficiency, 1.0);
    EXPECT_DOUBLE_EQ(m.agreement, 1.0);
    EXPECT_EQ(m.first_divergence, -1);
}

TEST(Viz, ColumnsOfTwoModelsHaveTheirOwnBaselineAndTitle) {
    // compare --also-model: a masked and a uniform-noise model, each with its own `none`.
    std::vector<RunView> runs{make_run("none", 16, 4), make_run("block-cache", 16, 4),
                              make_run("none", 16, 4), make_run("block-cache", 16, 4)};
    for (size_t k = 0; k < runs.size(); ++k) {
        runs[k].info.run_id = static_cast<int32_t>(k);
        runs[k].info.model_name = k < 2 ? "masked-tiny" : "uniform-tiny";
        runs[k].info.model_hash = k < 2 ? "aaaa" : "bbbb";
        runs[k].info.noise_process = k < 2 ? "masked" : "uniform";
    }
    EXPECT_EQ(baseline_of(runs, runs[1]), &runs[0]);
    EXPECT_EQ(baseline_of(runs, runs[3]), &runs[2]);  // not the other model's none
    EXPECT_EQ(column_title(runs, runs[3]), "block-cache @uniform-tiny (llada)");
    const std::vector<RunView> one_model(runs.begin(), runs.begin() + 2);
    EXPECT_EQ(column_title(one_model, one_model[1]), "block-cache");
    EXPECT_EQ(baseline_of({runs[3]}, runs[3]), nullptr);
    ViewState view;
    RecordingTextures tex;
    draw_all(runs, view, tex);
    view.figure_mode = true;
    view.figure_panel = "decode-order";
    draw_all(runs, view, tex);
}

// Lesson 2 showed two columns both titled "dkv-decode": columns of one policy are named by the
// parameters that differ between them.
TEST(Viz, ColumnsOfOnePolicyAreNamedByWhatDiffers) {
    std::vector<RunView> runs{make_run("none", 16, 2), make_run("dkv-decode", 16, 2),
                              make_run("dkv-decode", 16, 2)};
    runs[1].info.policy_params = {{"delay", "1"}, {"refresh_interval", "8"}};
    runs[2].info.policy_params = {{"delay", "0"}, {"refresh_interval", "8"}};
    EXPECT_EQ(column_title(runs, runs[0]), "none");
    EXPECT_EQ(column_title(runs, runs[1]), "dkv-decode (delay=1)");
    EXPECT_EQ(column_title(runs, runs[2]), "dkv-decode (delay=0)");
    const std::vector<RunView> alone(runs.begin(), runs.begin() + 2);
    EXPECT_EQ(column_title(alone, alone[1]), "dkv-decode");
}

// Total vertices ImGui emitted for one canvas frame: a panel that draws adds some.
int canvas_vertices(std::vector<RunView>& runs, ViewState& view, const CanvasOptions& options) {
    ImGuiNull imgui;
    RecordingTextures tex;
    int vertices = 0;
    imgui.frame([&] { draw_canvas(runs, view, tex, options); });
    vertices = ImGui::GetDrawData()->TotalVtxCount;
    return vertices;
}

// A figure of chosen columns draws those only (their baselines still come from every column).
TEST(Viz, AFigureOfChosenColumnsDrawsThoseOnly) {
    std::vector<RunView> runs{make_run("none", 24, 3), make_run("dkv-decode", 24, 3),
                              make_run("elastic", 24, 3)};
    runs[2].info.run_id = 2;
    ViewState view;
    view.figure_mode = true;
    view.figure_panel = "diff";
    const int all = canvas_vertices(runs, view, {});
    view.figure_columns = {2};
    const int one = canvas_vertices(runs, view, {});
    EXPECT_LT(one, all * 2 / 3) << "one of three columns";
    EXPECT_GT(one, 0);
}

TEST(Viz, AccuracySweepsAreDrawnBelowTheColumnsAndAlone) {
    trace::AccuracySweep sweep;
    sweep.gen_len = 64;
    sweep.block_len = 32;
    for (const char* noise : {"masked", "uniform"})
        for (int32_t t : {8, 16, 64}) {
            trace::AccuracyPoint p;
            p.model = std::string(noise) + "-tiny";
            p.noise_process = noise;
            p.task = "arith";
            p.steps = t;
            p.items = 10;
            p.correct = t / 8 + 2;
            p.low = 0.1;
            p.high = 0.9;
            sweep.points.push_back(p);
        }
    const std::vector<trace::AccuracySweep> sweeps{sweep};
    std::vector<RunView> runs{make_run("none", 12, 3)};
    ViewState view;
    CanvasOptions with, without;
    with.sweeps = &sweeps;
    EXPECT_GT(canvas_vertices(runs, view, with), canvas_vertices(runs, view, without));
    // Exported alone, and in a session that holds only a sweep.
    view.figure_mode = true;
    view.figure_panel = "accuracy-vs-steps";
    EXPECT_GT(canvas_vertices(runs, view, with), canvas_vertices(runs, view, without));
    std::vector<RunView> none;
    ViewState plain;
    EXPECT_GT(canvas_vertices(none, plain, with), canvas_vertices(none, plain, without));
}

TEST(Viz, StepSelectionClampsAndAligns) {
    auto r = make_run("none", 8, 5);
    ViewState v;
    EXPECT_EQ(column_step(r, v, 5), 4);
    v.step = 99;
    EXPECT_EQ(column_step(r, v, 5), 4);
    v.step = 2;
    EXPECT_EQ(column_step(r, v, 5), 2);
    v.align_by_progress = true;
    EXPECT_EQ(column_step(r, v, 9), 1);
    EXPECT_EQ(column_step(make_run("x", 8, 0), v, 9), -1);
}

TEST(Viz, ColormapsAreOrderedAndHandleNan) {
    auto lum = [](ImU32 c) {
        return ((c >> IM_COL32_R_SHIFT) & 0xff) + ((c >> IM_COL32_G_SHIFT) & 0xff) +
               ((c >> IM_COL32_B_SHIFT) & 0xff);
    };
    EXPECT_LT(lum(colormap_color(Colormap::Viridis, 0.f)),
              lum(colormap_color(Colormap::Viridis, 1.f)));
    EXPECT_LT(lum(colormap_color(Colormap::Magma, 0.1f)),
              lum(colormap_color(Colormap::Magma, 0.9f)));
    EXPECT_EQ(colormap_color(Colormap::Viridis, NAN), IM_COL32(128, 128, 128, 255));
    EXPECT_NE(state_color(trace::TokenState::Masked, true),
              state_color(trace::TokenState::DecodedNow, true));
}

}  // namespace
}  // namespace cl::viz

namespace cl::viz {
namespace {

ParetoData pareto_data() {
    ParetoData d;
    d.title = "test";
    d.points = {{"none", {}, 0.9, 0.8, 0.95, 50, 1, false},
                {"elastic", {{"gamma", 0.5}}, 0.9, 0.8, 0.95, 100, 2, true},
                {"dkv-decode", {{"refresh_interval", 8}}, 0.95, 0.85, 0.99, 40, 0.8, true}};
    return d;
}

TEST(Viz, TheParetoViewIsDrawnBelowTheColumnsAndAlone) {
    const auto data = pareto_data();
    std::vector<RunView> runs{make_run("none", 12, 3)};
    ViewState view;
    CanvasOptions with, without;
    with.pareto = &data;
    EXPECT_GT(canvas_vertices(runs, view, with), canvas_vertices(runs, view, without));
    view.figure_mode = true;
    view.figure_panel = "pareto";
    EXPECT_GT(canvas_vertices(runs, view, with), canvas_vertices(runs, view, without));
    const auto& names = panel_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "pareto"), names.end());
}

// A panel export is cropped to the rectangle its panels cover: the Pareto plot alone is far
// smaller than the 1600x1000 canvas; a column panel spans every column.
TEST(Viz, APanelExportKnowsTheRectangleItCovers) {
    const auto data = pareto_data();
    std::vector<RunView> runs{make_run("none", 12, 3), make_run("dkv-decode", 12, 3)};
    ViewState view;
    CanvasOptions options;
    options.pareto = &data;
    view.figure_mode = true;
    view.figure_panel = "pareto";
    canvas_vertices(runs, view, options);
    const ImVec4 pareto = view.figure_extent;
    EXPECT_GT(pareto.z - pareto.x, 800);
    EXPECT_GT(pareto.w - pareto.y, 100);
    EXPECT_LT(pareto.w - pareto.y, 600) << "the plot, not the whole canvas";
    view.figure_panel = "timeline";
    canvas_vertices(runs, view, options);
    const ImVec4 timeline = view.figure_extent;
    EXPECT_GT(timeline.z - timeline.x, 1200) << "both columns";
    EXPECT_GT(timeline.w - timeline.y, 20);
    EXPECT_LT(timeline.w - timeline.y, 500);
    view.figure_panel.clear();  // a whole-canvas export is not cropped
    canvas_vertices(runs, view, options);
    EXPECT_LE(view.figure_extent.z, view.figure_extent.x);
}

TEST(Viz, AParetoPointIsPickedWhereItIsDrawn) {
    const auto data = pareto_data();
    plot::Plot p;
    p.min = {100, 100};
    p.max = {500, 300};
    plot::setup_axes(p, 0, 110, 0, 1.05);
    for (size_t i = 0; i < data.points.size(); ++i) {
        const ImVec2 s = p.to_screen(data.points[i].tokens_per_s, data.points[i].accuracy);
        EXPECT_EQ(pareto_point_at(p, data, s), static_cast<int>(i));
        EXPECT_EQ(pareto_point_at(p, data, {s.x + 3, s.y - 3}), static_cast<int>(i));
    }
    EXPECT_EQ(pareto_point_at(p, data, {450, 290}), -1);  // empty space
}

// Narrow columns: a line too long for its width is cut at a character boundary with "..." and
// stays within the width; legend items that do not fit go to the next line.
TEST(Viz, LongTextIsCutToTheColumnAndLegendsWrap) {
    ImGuiNull imgui;
    imgui.frame([&] {
        const std::string text =
            "block_reset=1 delay=1 refresh_interval=8 \xce\xb1\xce\xb2\xce\xb3";
        const float full = ImGui::CalcTextSize(text.c_str()).x;
        EXPECT_EQ(fit_to_width(text, full + 1), text);
        for (float width : {full * 0.8f, full * 0.5f, 40.f}) {
            const std::string cut = fit_to_width(text, width);
            EXPECT_LE(ImGui::CalcTextSize(cut.c_str()).x, width) << cut;
            EXPECT_EQ(cut.substr(cut.size() - 3), "...");
            EXPECT_EQ(text.compare(0, cut.size() - 3, cut, 0, cut.size() - 3), 0) << cut;
        }
        // Cutting inside the Greek letters keeps whole UTF-8 characters.
        const std::string greek = "\xce\xb1\xce\xb2\xce\xb3\xce\xb4\xce\xb5\xce\xb6";
        for (float width = 0; width < ImGui::CalcTextSize(greek.c_str()).x; width += 1) {
            const std::string cut = fit_to_width(greek, width);
            EXPECT_EQ((cut.size() - 3) % 2, 0u) << "a character split at width " << width;
        }
        // A legend in a 200 px child: the items that do not fit start a new row.
        ImGui::BeginChild("narrow", {200, 200});
        const float y0 = ImGui::GetCursorScreenPos().y;
        float last_y = y0;
        for (const char* label : {"recomputed", "kv-reused", "probed-only", "feature-reused"}) {
            plot::legend_item(label, IM_COL32(255, 0, 0, 255));
            last_y = ImGui::GetItemRectMin().y;
            EXPECT_LE(ImGui::GetItemRectMax().x, ImGui::GetWindowPos().x + 200) << label;
        }
        EXPECT_GT(last_y, y0) << "the legend wrapped";
        ImGui::EndChild();
    });
}

}  // namespace
}  // namespace cl::viz

// cl_viz: Dear ImGui panels over cl_trace records. Depends on cl_trace and ImGui only: never
// on torch, Qt, SQLite or GL (textures come through the TextureProvider the host implements).
//
// [SECTION] RunView   [SECTION] ViewState   [SECTION] TextureProvider   [SECTION] entry points
#pragma once

#include <imgui.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/trace/accuracy_sweep.h"
#include "engine/trace/trace_types.h"
#include "viz/lesson.h"
#include "viz/pareto_data.h"

namespace cl::viz {

// [SECTION] RunView: one policy column, a snapshot taken at frame start (no lock while drawing).
struct RunView {
    trace::RunInfo info;
    std::vector<std::shared_ptr<const trace::StepRecord>> steps;
    std::optional<trace::RunSummary> summary;
    std::map<int32_t, std::string> token_text;  // accumulated id -> text
    bool live = true;                           // fed by the engine (false: replay)
    std::string status;                         // e.g. "re-running to step 40"
    // Throughput samples (tokens/s over time) for the live chart.
    std::vector<float> throughput;
    // When the prompt is a task item (arithmetic, reversal, key-value recall): the answer it
    // expects and, once the run is complete, what the run answered. Filled by the host.
    struct AnswerCheck {
        std::string expected;
        std::string answered;  // "" until the run is complete
        bool complete = false;
        bool correct = false;
    };
    std::optional<AnswerCheck> answer;
};

// [SECTION] ViewState: what the viewer looks at. Never part of the trace.
enum class Colormap : int { Viridis = 0, Magma = 1 };

struct ViewState {
    int32_t step = -1;         // selected step; -1 = follow the latest
    int32_t layer = 0;         // for the attention map
    int32_t head = -1;         // -1 = mean over heads
    int32_t hovered_pos = -1;  // position under the mouse (any column)
    int32_t pinned_pos = -1;   // position pinned in the inspector
    // The positions the timeline and the recompute map show, in every column alike: zoom_count
    // positions from zoom_first; 0 = the whole sequence (Ctrl+wheel over either panel zooms
    // around the cursor, a double click shows every position again).
    int32_t zoom_first = 0;
    int32_t zoom_count = 0;
    Colormap colormap = Colormap::Viridis;
    bool dark = true;
    bool oracle_view = false;      // show oracle staleness instead of drift
    bool figure_mode = false;      // hide controls (exports)
    std::string figure_panel;      // with figure_mode: draw only this panel of every column
    std::set<int> figure_columns;  // with figure_mode: only these columns (0-based; empty: all)
    // Filled by draw_canvas in figure mode with a panel export: the screen rectangle the
    // exported panels cover (min x, min y, max x, max y), so the host crops the image to it.
    ImVec4 figure_extent{0, 0, 0, 0};
    bool align_by_progress = false;
    int32_t steps_available = 0;  // filled by draw_canvas for the transport
    // Requests from panels to the host (consumed by the host after the frame).
    int32_t seek_request = -1;
    // Lesson player: panels to highlight and the text to show (empty when no lesson runs).
    std::set<std::string> highlight;
    std::string lesson_banner;
    // Lesson annotations, drawn as numbered markers at (step, position, layer) in the token strip
    // and the recompute map; hovering a marker shows its text.
    std::vector<Annotation> annotations;
    bool scroll_to_highlight = false;  // one-shot: scroll the columns to the highlighted panel
};

// [SECTION] TextureProvider: the host uploads textures (GL in the app, nothing in tests).
class TextureProvider {
public:
    virtual ~TextureProvider() = default;
    // A scalar field (w x h, row-major) colour-mapped on the GPU. `key` identifies the content:
    // the same key returns the cached texture without re-uploading.
    virtual ImTextureID scalar_texture(const std::string& key, int w, int h,
                                       const std::vector<float>& values, float lo, float hi,
                                       Colormap cmap) = 0;
    // Pre-coloured RGBA8 pixels (categorical maps: token states, actions).
    virtual ImTextureID rgba_texture(const std::string& key, int w, int h,
                                     const std::vector<uint32_t>& rgba) = 0;
    // The cached texture for `key`, or nullptr: lets panels skip building pixels they already sent.
    virtual ImTextureID cached(const std::string& key) { return nullptr; }
};

// A provider that uploads nothing (null backend tests, figure measurements).
class NullTextureProvider final : public TextureProvider {
public:
    ImTextureID scalar_texture(const std::string&, int, int, const std::vector<float>&, float,
                               float, Colormap) override {
        return nullptr;
    }
    ImTextureID rgba_texture(const std::string&, int, int, const std::vector<uint32_t>&) override {
        return nullptr;
    }
};

// [SECTION] entry points
struct CanvasOptions {
    float column_min_width = 240.f;
    // Reports of the open session drawn below the columns (the "accuracy-vs-steps" panel); null
    // or empty: none.
    const std::vector<trace::AccuracySweep>* sweeps = nullptr;
    // A sweep's points (the "pareto" panel, below the columns); null: none.
    const ParetoData* pareto = nullptr;
    // Set by draw_canvas to the index of a Pareto point the user clicked this frame (-1: none).
    int* pareto_clicked = nullptr;
};

// The whole canvas: one column per run, step-aligned, every panel of UX.md.
void draw_canvas(std::vector<RunView>& runs, ViewState& view, TextureProvider& textures,
                 const CanvasOptions& options = {});

// Resolves the step a column shows for the current view (clamped; -1 when it has none).
int32_t column_step(const RunView& run, const ViewState& view, int32_t max_steps);

}  // namespace cl::viz

// bench_viz: canvas frame build time with 4 policy columns, G = 512, 512 steps (issue target:
// <= 16 ms). ImGui's null backend (CPU work only: panels, pixel building, draw lists); textures are
// cached by key as the app's GL provider does. Two cases: a static frame, and scrubbing (a new step
// every frame, so the per-step textures are rebuilt). Table + JSON.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "engine/base/json_file.h"
#include "engine/base/stats.h"
#include "engine/trace/attention_detail.h"
#include "viz/viz_context.h"

namespace {

class CachingProvider final : public cl::viz::TextureProvider {
public:
    ImTextureID scalar_texture(const std::string& key, int, int, const std::vector<float>&, float,
                               float, cl::viz::Colormap) override {
        return add(key);
    }
    ImTextureID rgba_texture(const std::string& key, int, int,
                             const std::vector<uint32_t>&) override {
        return add(key);
    }
    ImTextureID cached(const std::string& key) override {
        return m_keys.count(key) ? reinterpret_cast<ImTextureID>(1) : nullptr;
    }

private:
    ImTextureID add(const std::string& key) {
        m_keys.insert(key);
        return reinterpret_cast<ImTextureID>(1);
    }
    std::set<std::string> m_keys;
};

cl::viz::RunView synthetic_run(int id, const std::string& policy, int P, int G, int steps, int N) {
    std::mt19937 rng(static_cast<unsigned>(id));
    cl::viz::RunView r;
    r.info.run_id = id;
    r.info.policy = policy;
    r.info.prompt_len = P;
    r.info.gen_len = G;
    r.info.n_layers = N;
    r.info.n_heads = 4;
    r.info.steps = steps;
    const int L = P + G;
    std::vector<int> order(static_cast<size_t>(G));
    for (int i = 0; i < G; ++i) order[static_cast<size_t>(i)] = P + i;
    std::vector<cl::trace::TokenState> states(static_cast<size_t>(L),
                                              cl::trace::TokenState::Masked);
    for (int i = 0; i < P; ++i) states[static_cast<size_t>(i)] = cl::trace::TokenState::Prompt;
    for (int t = 0; t < steps; ++t) {
        auto s = std::make_shared<cl::trace::StepRecord>();
        s->run_id = id;
        s->step = t;
        s->seq_len = L;
        s->n_layers = N;
        for (auto& st : states)
            if (st == cl::trace::TokenState::DecodedNow) st = cl::trace::TokenState::DecodedEarlier;
        states[static_cast<size_t>(order[static_cast<size_t>(t % G)])] =
            cl::trace::TokenState::DecodedNow;
        s->states = states;
        s->tokens.assign(static_cast<size_t>(L), 5);
        s->predicted.assign(static_cast<size_t>(L), 5);
        s->confidence.assign(static_cast<size_t>(L), 0.5f);
        s->committed = {order[static_cast<size_t>(t % G)]};
        s->actions.resize(static_cast<size_t>(N) * static_cast<size_t>(L));
        s->cache_age.resize(static_cast<size_t>(N) * static_cast<size_t>(L));
        for (int k = 0; k < N * L; ++k) {
            s->actions[static_cast<size_t>(k)] =
                rng() % 3 ? cl::trace::RowAction::KvReused : cl::trace::RowAction::Recomputed;
            s->cache_age[static_cast<size_t>(k)] = static_cast<uint16_t>(rng() % 64);
        }
        s->wall_ms = 10;
        s->flops = 1e9;
        s->flops_full = 3e9;
        cl::trace::TriggerEvent e;
        e.kind = "drift";
        e.layer = t % N;
        e.value = 0.85 + 0.1 * (rng() % 100) / 100.0;
        e.threshold = 0.9;
        e.fired = e.value < 0.9;
        s->triggers = {e};
        // Layer 0's map as the engine records it: 64 computed rows at full resolution, or at
        // the run's level of detail where the full maps would not fit the default budget.
        const int tile = cl::trace::attention_tile_for_budget(
            cl::trace::kDefaultAttentionBudgetBytes, N, L, steps);
        cl::trace::AttentionMap a;
        a.layer = 0;
        a.head = -1;
        a.keys = L;
        a.key_tile = tile;
        const int cells = (L + tile - 1) / tile;
        a.row_tile = 64 <= cells ? 1 : tile;
        std::vector<int32_t> positions;
        positions.reserve(64);
        for (int q = 0; q < 64; ++q) positions.push_back(P + q);
        const std::vector<float> probs(static_cast<size_t>(64 * L), 1.f / L);
        a.set_pooled_head_mean(probs.data(), 1, positions);
        s->attention = {a};
        r.steps.push_back(s);
    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Canvas frame build time (ImGui null backend)"};
    int columns = 4, gen = 512, steps = 512, prompt = 96, layers = 6, frames = 60;
    std::string json_file;
    app.add_option("--columns", columns)->capture_default_str();
    app.add_option("--gen-length", gen)->capture_default_str();
    app.add_option("--prompt", prompt, "P, prompt positions")->capture_default_str();
    app.add_option("--layers", layers, "N, layers")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("--steps", steps)->capture_default_str();
    app.add_option("--frames", frames)->capture_default_str();
    app.add_option("--json", json_file, "Write results as JSON");
    CLI11_PARSE(app, argc, argv);
    try {
        cl::check_json_writable(json_file);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cachelens-bench-viz: error: %s\n", e.what());
        return 2;
    }
    const char* names[] = {"none", "dkv-decode", "elastic", "fast-dual", "d2cache", "dllm-cache"};
    std::vector<cl::viz::RunView> runs;
    runs.reserve(static_cast<size_t>(columns));
    for (int c = 0; c < columns; ++c)
        runs.push_back(synthetic_run(c, names[c % 6], prompt, gen, steps, layers));
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = {1920, 1080};
    io.IniFilename = nullptr;
    io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;  // as the GL3 backend
    unsigned char* px;
    int w, h;
    io.Fonts->GetTexDataAsRGBA32(&px, &w, &h);
    CachingProvider tex;
    cl::viz::ViewState view;
    auto frame = [&] {
        const auto t0 = std::chrono::steady_clock::now();
        ImGui::NewFrame();
        ImGui::SetNextWindowPos({0, 0});
        ImGui::SetNextWindowSize(io.DisplaySize);
        ImGui::Begin("canvas");
        cl::viz::draw_canvas(runs, view, tex);
        ImGui::End();
        ImGui::Render();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
            .count();
    };
    frame();  // first frame builds every texture
    std::vector<double> still, scrub;
    view.step = steps / 2;
    frame();
    for (int i = 0; i < frames; ++i) still.push_back(frame());
    for (int i = 0; i < frames; ++i) {
        view.step = (i * 7) % steps;
        scrub.push_back(frame());
    }
    std::printf("canvas: %d columns, G=%d, %d steps, %d layers\n%-10s %10s %10s\n", columns, gen,
                steps, layers, "case", "median_ms", "max_ms");
    std::printf("%-10s %10.2f %10.2f\n", "static", cl::stats::median(still),
                *std::max_element(still.begin(), still.end()));
    std::printf("%-10s %10.2f %10.2f\n", "scrubbing", cl::stats::median(scrub),
                *std::max_element(scrub.begin(), scrub.end()));
    ImGui::DestroyContext();
    if (json_file.empty()) return 0;
    try {
        cl::write_json_file(json_file, {{"columns", columns},
                                        {"gen_length", gen},
                                        {"steps", steps},
                                        {"static_median_ms", cl::stats::median(still)},
                                        {"scrub_median_ms", cl::stats::median(scrub)}});
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cachelens-bench-viz: error: %s\n", e.what());
        return 2;
    }
    return 0;
}

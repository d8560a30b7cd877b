// bench_soak: the app's engine thread (EngineBridge, as the window drives it) through N
// consecutive generations in one process, a random policy mix and random parameters within each
// policy's ranges per generation, recording into a session for the second half; resident memory
// (and the session's size) sampled as it goes. Issue target: growth <= 5% after warm-up.
//   cachelens-bench-soak [--generations 1000] [--model DIR] [--max-growth 5] [--json F]
// Exits 1 when the growth passes --max-growth (the `soak` CTest, label long).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bridge/engine_bridge.h"
#include "engine/base/assets.h"
#include "engine/base/json_file.h"
#include "engine/base/process_memory.h"
#include "engine/generation/policy_registry.h"

namespace {

using Clock = std::chrono::steady_clock;

double resident_mb() {
    return cl::resident_bytes() / 1e6;
}

// Two or three columns: `none` and random policies with random parameters in their ranges.
cl::app::RunSetup random_setup(std::mt19937& rng) {
    const auto policies = cl::list_policies();
    cl::app::RunSetup s;
    s.prompt = "What is 245 + 699?";
    s.config.gen_length = 32;
    s.config.block_length = 16;
    s.config.steps = 16;
    s.config.seed = rng();
    s.drift = rng() % 2;
    s.oracle = rng() % 4 == 0;
    s.columns.push_back({"none", {}, nullptr});
    const int extra = 1 + static_cast<int>(rng() % 2);
    for (int c = 0; c < extra; ++c) {
        const auto& p = policies[rng() % policies.size()];
        cl::app::ColumnSpec col{p.name, {}, nullptr};
        for (const auto& spec : p.params) {
            std::uniform_real_distribution<double> u(spec.min, spec.max);
            const double v = u(rng);
            col.params[spec.name] = spec.integral() ? std::round(v) : v;
        }
        s.columns.push_back(col);
    }
    return s;
}

// Every column of the setup has a run newer than `after` (the configure was taken) that ended.
bool finished(const cl::app::EngineBridge& bridge, size_t columns, int32_t after) {
    const auto runs = bridge.snapshot();
    if (runs.size() != columns) return false;
    for (const auto& r : runs) {
        const bool failed = r.status.rfind("error", 0) == 0;
        if (!failed && (r.info.run_id <= after || !r.summary)) return false;
    }
    return !bridge.busy();
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Soak: N generations through the app's engine thread; resident memory over time"};
    int generations = 1000;
    std::string model_dir, json_file;
    double max_growth = 5.0;
    app.add_option("--generations", generations, "Consecutive generations")
        ->check(CLI::Range(10, 1000000));
    app.add_option("--model", model_dir, "Model folder (default: the embedded model)");
    app.add_option("--max-growth", max_growth, "Fail above this growth after warm-up (%)");
    app.add_option("--json", json_file, "Also write the samples as JSON");
    CLI11_PARSE(app, argc, argv);
    if (model_dir.empty()) model_dir = (cl::assets_dir() / "models" / "cachelens-tiny").string();
    try {
        cl::check_json_writable(json_file);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cachelens-bench-soak: error: %s\n", e.what());
        return 2;
    }

    const auto session = std::filesystem::temp_directory_path() /
                         ("cachelens-soak-" + std::to_string(getpid()) + ".clsession");
    std::mt19937 rng(7);  // NOLINT(bugprone-random-generator-seed): the same mix every run
    nlohmann::json samples = nlohmann::json::array();
    const auto t0 = Clock::now();
    double warm = 0, last = 0;
    int errors = 0;
    {
        cl::app::EngineBridge bridge(cl::Model::load(model_dir), 1);
        std::printf("%10s %10s %12s %10s\n", "generation", "RSS MB", "session MB", "seconds");
        for (int g = 1; g <= generations; ++g) {
            if (g == generations / 2) bridge.set_recording(session.string());
            int32_t newest = -1;
            for (const auto& r : bridge.snapshot()) newest = std::max(newest, r.info.run_id);
            const auto setup = random_setup(rng);
            if (std::getenv("CACHELENS_SOAK_TRACE")) {
                std::fprintf(stderr, "generation %d:", g);
                for (const auto& c : setup.columns) {
                    std::fprintf(stderr, " %s", c.policy.c_str());
                    for (const auto& [k, v] : c.params)
                        std::fprintf(stderr, " %s=%g", k.c_str(), v);
                    std::fprintf(stderr, ";");
                }
                std::fprintf(stderr, " oracle=%d drift=%d\n", setup.oracle, setup.drift);
            }
            bridge.configure(setup);
            bridge.advance_to(1 << 20);
            while (!finished(bridge, setup.columns.size(), newest))
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            if (!bridge.last_error().empty()) ++errors;
            if (g % std::max(1, generations / 20) != 0 && g != generations) continue;
            last = resident_mb();
            if (g <= generations / 10 || warm == 0) warm = last;  // warm-up: the first 10%
            std::error_code ec;
            const double session_mb =
                static_cast<double>(std::filesystem::file_size(session, ec)) / 1e6;
            const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
            std::printf("%10d %10.1f %12.1f %10.0f\n", g, last, ec ? 0.0 : session_mb, seconds);
            samples.push_back({{"generation", g},
                               {"rss_mb", last},
                               {"session_mb", ec ? 0.0 : session_mb},
                               {"seconds", seconds}});
        }
        bridge.flush_recording();
    }
    std::filesystem::remove(session);
    std::filesystem::remove(session.string() + "-wal");
    std::filesystem::remove(session.string() + "-shm");
    const double growth = 100.0 * (last - warm) / warm;
    std::printf(
        "resident memory after warm-up (10%%): %.1f MB -> %.1f MB at the end: %+.2f%% "
        "(limit %.1f%%); %d generations reported an error\n",
        warm, last, growth, max_growth, errors);
    if (!json_file.empty()) {
        try {
            cl::write_json_file(json_file, {{"generations", generations},
                                            {"warm_rss_mb", warm},
                                            {"final_rss_mb", last},
                                            {"growth_percent", growth},
                                            {"samples", samples}});
        } catch (const std::exception& e) {
            std::fprintf(stderr, "cachelens-bench-soak: error: %s\n", e.what());
            return 2;
        }
    }
    return growth > max_growth ? 1 : 0;
}

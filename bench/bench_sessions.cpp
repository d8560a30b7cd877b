// bench_sessions: what tracing and recording cost and how fast sessions open (issue targets:
// collecting the full trace <= 5% of step time; recording <= 5% of generation time (measured
// against the traced run, since the recorder receives the same records); opening a 3-policy G=256
// session and loading every step's metadata
// <= 0.5 s; one step's full data with one attention layer <= 10 ms). Table + JSON.
//   cachelens-bench-sessions [--model DIR] [--policies none,dkv-decode,elastic] [--gen-length 256]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/base/json_file.h"
#include "engine/base/stats.h"
#include "engine/generation/generator.h"
#include "engine/tasks/task_suite.h"
#include "engine/trace/trace_store.h"
#include "sessions/session_reader.h"
#include "sessions/session_writer.h"

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
}  // namespace

// --open: times opening a session as the app does (every step of every run; attention on demand).
void time_open(const std::string& open_file, int repeats, const std::string& json_file) {
    std::vector<double> full, meta;
    for (int r = 0; r < std::max(3, repeats); ++r) {
        auto t0 = Clock::now();
        auto reader = cl::sessions::SessionReader::open(open_file, false);
        size_t steps = 0;
        for (const auto& run : reader->runs()) steps += reader->step_scalars(run.run_id).size();
        meta.push_back(ms_since(t0));
        t0 = Clock::now();
        cl::trace::TraceStore store(false);
        reader->load_into(store, {},
                          /*with_attention=*/false);  // as the app: attention on demand
        full.push_back(ms_since(t0));
        if (r == 0)
            std::printf("%s: %zu runs, %zu steps, %.1f MB\n", open_file.c_str(),
                        reader->runs().size(), steps, std::filesystem::file_size(open_file) / 1e6);
    }
    std::printf(
        "open + step metadata: median %.1f ms\nfull load (every step; attention is fetched "
        "on demand): median %.1f ms\n",
        cl::stats::median(meta), cl::stats::median(full));
    if (!json_file.empty())
        cl::write_json_file(json_file, {{"open_meta_ms", cl::stats::median(meta)},
                                        {"full_load_ms", cl::stats::median(full)}});
}

// One policy's generation time without a sink, with the full trace and with the recorder, and
// the writer's CPU time and backlog; prints its row and returns it as JSON.
nlohmann::json measure_policy(const std::shared_ptr<cl::Model>& model, cl::GenerationRequest req,
                              const std::string& p,
                              const cl::sessions::WriterOptions& writer_options,
                              const std::string& out, int repeats) {
    req.policy = p;
    std::vector<double> plain, traced, rec, writer_cpu, flush;
    for (int r = 0; r < repeats; ++r) {
        auto t0 = Clock::now();
        cl::Generator(model, req).run();
        plain.push_back(ms_since(t0));
        // The full trace as the app collects it: every step record + head-mean attention.
        cl::trace::TraceStore store;
        store.set_want_all_attention_means(true);
        t0 = Clock::now();
        cl::Generator(model, req, &store).run();
        traced.push_back(ms_since(t0));
        std::filesystem::remove(out + ".tmp");
        auto w = cl::sessions::SessionWriter::open(out + ".tmp", writer_options);
        t0 = Clock::now();
        cl::Generator(model, req, w.get()).run();
        rec.push_back(ms_since(t0));  // generation time with the recorder attached
        t0 = Clock::now();
        w->flush();
        flush.push_back(ms_since(t0));  // what the writer still had to do after the run
        writer_cpu.push_back(w->cpu_ms());
    }
    // Keep one recorded run of each policy in the comparison file.
    {
        auto w = cl::sessions::SessionWriter::open(out, writer_options);
        cl::Generator(model, req, w.get()).run();
        w->flush();
    }
    const double a = cl::stats::median(plain), t = cl::stats::median(traced),
                 b = cl::stats::median(rec), cpu = cl::stats::median(writer_cpu),
                 f = cl::stats::median(flush);
    std::printf("%-12s %12.1f %12.1f %8.1f%% %12.1f %8.1f%% %11.1f%% %10.1f\n", p.c_str(), a, t,
                100 * (t - a) / a, b, 100 * (b - a) / a, 100 * cpu / a, f);
    return {{"policy", p},          {"no_sink_ms", a},
            {"traced_ms", t},       {"trace_overhead", (t - a) / a},
            {"recorded_ms", b},     {"record_overhead", (b - a) / a},
            {"writer_cpu_ms", cpu}, {"flush_ms", f}};
}

// Read side: open + every step's metadata, then one step's full data with one attention layer.
void time_read_side(const std::string& out, int repeats, nlohmann::json& j) {
    std::vector<double> open_ms, fetch_ms;
    for (int r = 0; r < std::max(3, repeats); ++r) {
        auto t0 = Clock::now();
        auto reader = cl::sessions::SessionReader::open(out, false);
        auto runs = reader->runs();
        size_t steps = 0;
        for (const auto& run : runs) steps += reader->step_scalars(run.run_id).size();
        open_ms.push_back(ms_since(t0));
        for (int k = 0; k < 10; ++k) {
            t0 = Clock::now();
            auto s = reader->load_step(runs[0].run_id,
                                       static_cast<int32_t>((k * 37) % steps / runs.size()), {2});
            fetch_ms.push_back(ms_since(t0));
        }
    }
    const auto size = std::filesystem::file_size(out);
    std::printf(
        "\nsession %s: %.1f MB\nopen + all step metadata: median %.1f ms\none step (masks + "
        "attention layer 2): median %.2f ms\n",
        out.c_str(), size / 1e6, cl::stats::median(open_ms), cl::stats::median(fetch_ms));
    j["file_mb"] = size / 1e6;
    j["open_ms"] = cl::stats::median(open_ms);
    j["fetch_step_ms"] = cl::stats::median(fetch_ms);
}

int main(int argc, char** argv) {
    CLI::App app{"Session recording overhead and read speed"};
    std::string model_dir, policies_csv = "none,dkv-decode,elastic", json_file,
                           out = "/tmp/cachelens-bench.clsession";
    int64_t gen = 256;
    int repeats = 5;
    app.add_option("--model", model_dir, "Model folder (default: the embedded model)");
    app.add_option("--policies", policies_csv, "Policies of the comparison")->capture_default_str();
    app.add_option("--gen-length", gen, "G (steps = G, block 32)")->capture_default_str();
    app.add_option("--repeats", repeats, "Repeats (median)")->capture_default_str();
    int threads = 1;
    app.add_option("--threads", threads,
                   "Engine threads (OpenBLAS); below the core count the trace worker gets a core")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("--out", out, "Session file to write")->capture_default_str();
    cl::sessions::WriterOptions writer_options;
    app.add_option("--attention-bits", writer_options.attention_bits,
                   "Attention precision of the recording (4 or 8)")
        ->capture_default_str();
    app.add_option("--json", json_file, "Write results as JSON");
    std::string open_file;
    app.add_option("--open", open_file,
                   "Only time opening this session as the app does (every step of every run; "
                   "attention on demand)");
    CLI11_PARSE(app, argc, argv);
    try {
        cl::check_json_writable(json_file);
        if (!open_file.empty()) {
            time_open(open_file, repeats, json_file);
            return 0;
        }
        cl::set_thread_count(threads);
        auto dir = model_dir.empty() ? cl::default_model_dir() : std::filesystem::path(model_dir);
        auto model = cl::Model::load(dir);
        std::vector<std::string> policies;
        std::stringstream ss(policies_csv);
        for (std::string p; std::getline(ss, p, ',');) policies.push_back(p);
        // A kv prompt of 28-30 pairs: ~190 tokens, the long end of the 64-200 range (the
        // uncached run's attention grows with the square of the sequence).
        cl::tasks::TaskGenerator tg(7, cl::tasks::Split::Eval,
                                    cl::tasks::Difficulty{3, 28, 30, 3, 8});
        cl::GenerationRequest req;
        req.prompt_text = tg.next("kv").prompt;
        req.config.gen_length = gen;
        req.config.block_length = 32;
        req.config.steps = gen;
        req.threads = threads;
        const int32_t prompt_tokens = cl::Generator(model, req).info().prompt_len;
        cl::Generator(model, req).run();  // warm-up: first-touch allocations, OpenBLAS buffers
        std::printf("prompt: %d tokens (chat template included), G=%lld, %d thread(s)\n",
                    prompt_tokens, static_cast<long long>(gen), threads);
        std::printf("%-12s %12s %12s %9s %12s %9s %12s %10s\n", "policy", "no_sink_ms", "traced_ms",
                    "trace", "recorded_ms", "record", "writer_cpu", "flush_ms");
        std::printf(
            "(trace: every step record + head-mean attention of every layer in memory; record: the "
            "same into a session file; writer_cpu: the recorder thread's CPU time / no_sink_ms; "
            "flush_ms: the writer's backlog when the run ended)\n");
        nlohmann::json j = {{"policies", nlohmann::json::array()},
                            {"prompt_tokens", prompt_tokens},
                            {"threads", threads}};
        std::filesystem::remove(out);
        for (const auto& p : policies) {
            j["policies"].push_back(measure_policy(model, req, p, writer_options, out, repeats));
        }
        std::filesystem::remove(out + ".tmp");
        time_read_side(out, repeats, j);
        if (!json_file.empty()) cl::write_json_file(json_file, j);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cachelens-bench-sessions: error: %s\n", e.what());
        return 2;
    }
    return 0;
}

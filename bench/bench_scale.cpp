// bench_scale: the instruments at the real models' shape (issue targets, 3 columns at 32 layers,
// L = 1,280, 1,024 steps: peak RSS <= 2 GB beyond the model, <= 1 GB of session per column,
// capture + recording <= 10% of step time; replay: open <= 1 s, any step and layer <= 100 ms).
// Random models of the real layer and head counts at a width the CPU runs (init-model's
// weights), prompt P and G = 0.8 L as in the papers' tables, block 32, the planned steps
// (1,024) deciding the attention detail. On the CPU a 1,024-step run takes hours, so each column
// runs its first --measure-steps steps twice (without a sink, and with the app's trace + a
// session recorder) and the per-step figures are projected to the planned steps: the store and
// the session grow by a fixed amount a step (the table shows it), attention included, since the
// maps' level of detail is fixed for the run. Then the recorder at GPU rate: a producer of
// 8B-shaped records (32 layers, L = 1,280, maps at the default detail) publishing at --rate steps/s
// for --seconds, with the backlog and the writer's throughput. Table + JSON.
//   cachelens-bench-scale [--model DIR ...] [--lengths 512,1280] [--planned-steps 1024]
//                         [--measure-steps 4] [--policies none,fast-dual,elastic] [--threads 1]
//                         [--rate 60] [--seconds 60] [--json FILE]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "engine/base/json_file.h"
#include "engine/base/process_memory.h"
#include "engine/base/stats.h"
#include "engine/generation/generator.h"
#include "engine/model/model_writer.h"
#include "engine/trace/attention_detail.h"
#include "engine/trace/trace_store.h"
#include "sessions/session_reader.h"
#include "sessions/session_writer.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The peak resident set since the last reset_peak_resident (VmHWM), in bytes.
double peak_resident_bytes() {
    std::ifstream in("/proc/self/status");
    std::string key;
    double kb = 0;
    while (in >> key) {
        if (key == "VmHWM:") {
            in >> kb;
            return kb * 1024;
        }
        in.ignore(1 << 10, '\n');
    }
    return 0;
}
void reset_peak_resident() {
    std::ofstream("/proc/self/clear_refs") << "5";
}

// What a step record holds in memory: its arrays and maps (the vectors' payloads).
double record_bytes(const cl::trace::StepRecord& r) {
    auto bytes = [](const auto& v) { return static_cast<double>(v.size() * sizeof(v[0])); };
    double b = bytes(r.tokens) + bytes(r.states) + bytes(r.predicted) + bytes(r.confidence) +
               bytes(r.topk_ids) + bytes(r.topk_probs) + bytes(r.entropy) + bytes(r.margin) +
               bytes(r.committed) + bytes(r.actions) + bytes(r.cache_age) + bytes(r.layer_ms) +
               bytes(r.drift.k_cos) * 4 + bytes(r.oracle.k_cos) * 4 + sizeof(r);
    for (const auto& a : r.attention)
        b += bytes(a.levels) + bytes(a.row_index) + bytes(a.row_scale) + sizeof(a);
    return b;
}

struct Shape {
    std::string name;
    fs::path dir;
};

// The random models of the real layer and head counts (init-model's weights), made once.
std::vector<Shape> default_models(const fs::path& root) {
    struct Spec {
        const char* name;
        int64_t d_model, heads;
    };
    std::vector<Shape> out;
    for (const Spec& s :
         {Spec{"32L x 32H (d 128)", 128, 32}, Spec{"32L x 2H of 128 (d 256)", 256, 2}}) {
        const fs::path dir = root / ("l32-d" + std::to_string(s.d_model));
        if (!fs::exists(dir / "config.json")) {
            auto config = cl::tiny_config(s.d_model, 32, s.heads, s.heads);
            config.max_sequence_length = 4096;
            cl::init_random_model(dir, config, 1);
        }
        out.push_back({s.name, dir});
    }
    return out;
}

std::vector<std::string> split(const std::string& csv) {
    std::vector<std::string> out;
    std::stringstream in(csv);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

std::string prompt_of(int64_t tokens) {  // the byte-level tokenizer: one token a character
    const std::string text = "the quick brown fox jumps over the lazy dog. ";
    std::string p;
    while (static_cast<int64_t>(p.size()) < tokens) p += text;
    p.resize(static_cast<size_t>(tokens));
    return p;
}

struct ColumnFigures {
    std::string policy;
    double plain_ms = 0, traced_ms = 0;  // median step, without a sink / traced + recorded
    double store_bytes_per_step = 0;     // what the app's store keeps a step
    double session_bytes_per_step = 0;   // what the session grows by a step
    int32_t attention_tile = 1;
};

// One column: `steps` steps without a sink, then with the app's store and the recorder.
ColumnFigures measure_column(const std::shared_ptr<cl::Model>& model,
                             const cl::GenerationRequest& req, int steps,
                             cl::trace::TraceStore& store, cl::sessions::SessionWriter& writer) {
    ColumnFigures f;
    f.policy = req.policy;
    std::vector<double> plain, traced;
    {
        cl::Generator g(model, req);
        for (int s = 0; s < steps && !g.done(); ++s) {
            const auto t0 = Clock::now();
            g.step();
            plain.push_back(ms_since(t0));
        }
    }
    cl::trace::FanOutSink sinks;
    sinks.add(&store);
    sinks.add(&writer);
    cl::Generator g(model, req, &sinks);
    f.attention_tile = g.info().attention_tile;
    for (int s = 0; s < steps && !g.done(); ++s) {
        const auto t0 = Clock::now();
        g.step();
        traced.push_back(ms_since(t0));
    }
    g.finish(true);
    f.plain_ms = cl::stats::median(plain);
    f.traced_ms = cl::stats::median(traced);
    double bytes = 0;
    for (const auto& r : store.steps(req.run_id)) bytes += record_bytes(*r);
    f.store_bytes_per_step = bytes / std::max<size_t>(store.step_count(req.run_id), 1);
    return f;
}

// Replay of the recorded session: open + every step's metadata, then steps and layers at random.
nlohmann::json time_replay(const std::string& path, int32_t layers) {
    std::vector<double> open_ms, fetch_ms;
    std::mt19937 rng(7);  // NOLINT(bugprone-random-generator-seed): the same fetches every run
    for (int r = 0; r < 3; ++r) {
        auto t0 = Clock::now();
        auto reader = cl::sessions::SessionReader::open(path, false);
        auto runs = reader->runs();
        cl::trace::TraceStore replay(false);
        reader->load_into(replay, {}, /*with_attention=*/false);  // as the app: maps on demand
        open_ms.push_back(ms_since(t0));
        for (int k = 0; k < 10; ++k) {
            const auto& run = runs[rng() % runs.size()];
            const auto step = static_cast<int32_t>(rng() % std::max<int64_t>(run.step_count, 1));
            const auto layer = static_cast<int32_t>(rng() % static_cast<unsigned>(layers));
            t0 = Clock::now();
            auto s = reader->load_step(run.run_id, step, {layer});
            fetch_ms.push_back(ms_since(t0));
        }
    }
    return {{"open_ms", cl::stats::median(open_ms)},
            {"open_ms_max", *std::max_element(open_ms.begin(), open_ms.end())},
            {"step_layer_ms", cl::stats::median(fetch_ms)},
            {"step_layer_ms_max", *std::max_element(fetch_ms.begin(), fetch_ms.end())}};
}

struct Options {
    std::vector<std::string> models;
    std::string lengths = "512,1280", policies = "none,fast-dual,elastic", json_file;
    std::string work_dir = (fs::temp_directory_path() / "cachelens-bench-scale").string();
    int planned_steps = 1024, measure_steps = 4, threads = 1, seconds = 60;
    double rate = 60;
};

nlohmann::json measure_shape(const Shape& shape, int64_t L, const Options& o) {
    const int64_t G = std::max<int64_t>(128, L * 4 / 5 / 128 * 128), P = L - G;
    const int64_t blocks = G / 32,
                  planned = std::min<int64_t>(o.planned_steps, G) / blocks * blocks;
    auto model = cl::Model::load(shape.dir);
    const double rss_model = cl::resident_bytes();
    reset_peak_resident();
    const std::string session = o.work_dir + "/scale.clsession";
    fs::remove(session);
    cl::sessions::WriterOptions wo;
    auto writer = cl::sessions::SessionWriter::open(session, wo);
    std::vector<std::unique_ptr<cl::trace::TraceStore>> stores;  // the app's columns, kept
    std::vector<ColumnFigures> columns;
    int32_t run_id = 0;
    std::map<int64_t, int64_t> before;
    for (const auto& policy : split(o.policies)) {
        cl::GenerationRequest req;
        req.prompt_text = prompt_of(P);
        req.chat_template = false;
        req.config.gen_length = G;
        req.config.block_length = 32;
        req.config.steps = planned;
        req.policy = policy;
        req.threads = o.threads;
        req.run_id = run_id++;
        stores.push_back(std::make_unique<cl::trace::TraceStore>());
        stores.back()->set_want_all_attention_means(true);
        columns.push_back(measure_column(model, req, o.measure_steps, *stores.back(), *writer));
    }
    writer->flush();
    const double peak = peak_resident_bytes() - rss_model;
    writer.reset();
    auto reader = cl::sessions::SessionReader::open(session, false);
    auto bytes = reader->run_bytes();
    const auto runs = reader->runs();  // by column, in the order they were made
    reader.reset();
    double store_per_step = 0;
    nlohmann::json cols = nlohmann::json::array();
    for (size_t c = 0; c < columns.size(); ++c) {
        auto& f = columns[c];
        f.session_bytes_per_step =
            static_cast<double>(c < runs.size() ? bytes[runs[c].run_id] : 0) /
            std::max(1, o.measure_steps);
        store_per_step += f.store_bytes_per_step;
        const double share = (f.traced_ms - f.plain_ms) / f.traced_ms;
        std::printf(
            "  %-10s step %8.1f ms plain %8.1f ms traced (capture + record %5.1f%%), "
            "tile %d, store %6.2f MB/step, session %6.2f MB/step -> %7.1f MB at %lld "
            "steps\n",
            f.policy.c_str(), f.plain_ms, f.traced_ms, 100 * share, f.attention_tile,
            f.store_bytes_per_step / 1e6, f.session_bytes_per_step / 1e6,
            f.session_bytes_per_step * static_cast<double>(planned) / 1e6,
            static_cast<long long>(planned));
        cols.push_back({{"policy", f.policy},
                        {"plain_step_ms", f.plain_ms},
                        {"traced_step_ms", f.traced_ms},
                        {"capture_record_share", share},
                        {"attention_tile", f.attention_tile},
                        {"store_bytes_per_step", f.store_bytes_per_step},
                        {"session_bytes_per_step", f.session_bytes_per_step},
                        {"session_bytes_projected", f.session_bytes_per_step * planned}});
    }
    const double projected = peak + store_per_step * static_cast<double>(planned - o.measure_steps);
    auto replay = time_replay(session, static_cast<int32_t>(model->config().n_layers));
    std::printf(
        "  peak RSS beyond the model: %.0f MB measured over %d steps; %.0f MB projected "
        "at %lld steps (the stores' growth)\n  replay: open %.1f ms, a step and layer "
        "%.2f ms (max %.2f)\n",
        peak / 1e6, o.measure_steps, projected / 1e6, static_cast<long long>(planned),
        replay["open_ms"].get<double>(), replay["step_layer_ms"].get<double>(),
        replay["step_layer_ms_max"].get<double>());
    return {{"model", shape.name},
            {"model_dir", shape.dir.string()},
            {"layers", model->config().n_layers},
            {"heads", model->config().n_heads},
            {"d_model", model->config().d_model},
            {"seq_len", L},
            {"prompt", P},
            {"gen_length", G},
            {"planned_steps", planned},
            {"measured_steps", o.measure_steps},
            {"columns", cols},
            {"peak_rss_beyond_model_measured", peak},
            {"peak_rss_beyond_model_projected", projected},
            {"replay_of_measured_steps", replay}};
}

// An 8B-shaped record: 32 layers, L = 1,280, every layer's map at the default detail of a
// 1,024-step run, actions and ages of a cached step.
std::shared_ptr<cl::trace::StepRecord> gpu_rate_record(int32_t step, std::mt19937& rng) {
    constexpr int32_t N = 32, L = 1280, P = 256;
    const int32_t tile =
        cl::trace::attention_tile_for_budget(cl::trace::kDefaultAttentionBudgetBytes, N, L, 1024);
    auto r = std::make_shared<cl::trace::StepRecord>();
    r->run_id = 0;
    r->step = step;
    r->seq_len = L;
    r->n_layers = N;
    r->tokens.assign(L, 5);
    r->states.assign(L, cl::trace::TokenState::Masked);
    r->predicted.assign(L, 5);
    r->confidence.assign(L, 0.5f);
    r->topk_ids.assign(L * 5, 5);
    r->topk_probs.assign(L * 5, 0.1f);
    r->entropy.assign(L, 1.f);
    r->margin.assign(L, 0.1f);
    r->committed = {P + step % (L - P)};
    r->actions.resize(static_cast<size_t>(N) * L);
    r->cache_age.resize(static_cast<size_t>(N) * L);
    for (size_t k = 0; k < r->actions.size(); ++k) {
        r->actions[k] = (k % L) / 32 == static_cast<size_t>(step / 32 % 40)
                            ? cl::trace::RowAction::Recomputed
                            : cl::trace::RowAction::KvReused;
        r->cache_age[k] = static_cast<uint16_t>(step % 32);
    }
    r->layer_ms.assign(N, 0.5f);
    const int32_t cells = (L + tile - 1) / tile;
    std::vector<float> probs(static_cast<size_t>(cells) * static_cast<size_t>(cells));
    std::exponential_distribution<float> e(1.f);
    for (int32_t l = 0; l < N; ++l) {
        for (auto& p : probs) p = e(rng) * e(rng);
        cl::trace::AttentionMap a;
        a.layer = l;
        a.rows = a.cols = cells;
        a.keys = L;
        a.key_tile = a.row_tile = tile;
        for (int32_t q = 0; q < cells; ++q) a.row_index.push_back(q * tile);
        a.set_probs(probs.data());
        r->attention.push_back(std::move(a));
    }
    return r;
}

nlohmann::json measure_recorder(const Options& o) {
    const std::string path = o.work_dir + "/gpu-rate.clsession";
    fs::remove(path);
    std::mt19937 rng(3);  // NOLINT(bugprone-random-generator-seed): the same records every run
    // Records made before the clock starts, so the producer only publishes (a GPU engine's cost).
    std::vector<std::shared_ptr<cl::trace::StepRecord>> pool;
    pool.reserve(64);
    for (int i = 0; i < 64; ++i) pool.push_back(gpu_rate_record(i, rng));
    auto writer = cl::sessions::SessionWriter::open(path);
    cl::trace::RunInfo info;
    info.policy = "fast-dual";
    info.prompt_len = 256;
    info.gen_len = 1024;
    info.steps = 1024;
    info.n_layers = 32;
    info.n_heads = 32;
    info.attention_tile = pool[0]->attention[0].key_tile;
    info.initial_tokens.assign(1280, 5);
    writer->on_run_start(info);
    const auto total = static_cast<int>(o.rate * o.seconds);
    std::vector<double> backlog, late_ms;
    const auto start = Clock::now();
    for (int s = 0; s < total; ++s) {
        const auto due = start + std::chrono::duration<double>(s / o.rate);
        std::this_thread::sleep_until(due);
        late_ms.push_back(
            std::max(0.0, ms_since(std::chrono::time_point_cast<Clock::duration>(due))));
        auto rec =
            std::make_shared<cl::trace::StepRecord>(*pool[static_cast<size_t>(s) % pool.size()]);
        rec->step = s;
        writer->publish(rec);
        backlog.push_back(static_cast<double>(writer->unwritten_steps()));
    }
    const double produce_s = ms_since(start) / 1e3;
    writer->flush();
    const double done_s = ms_since(start) / 1e3;
    const double cpu_s = writer->cpu_ms() / 1e3;
    writer.reset();
    auto reader = cl::sessions::SessionReader::open(path, false);
    const auto runs = reader->runs();
    const int64_t stored = runs.empty() ? 0 : runs[0].step_count;
    const double mb = static_cast<double>(fs::file_size(path)) / 1e6;
    std::printf(
        "\nrecorder at %.0f steps/s of 8B-shaped records (32 layers, L = 1280, %dx%d "
        "tiles) for %d s:\n  produced %d steps in %.1f s (%.1f steps/s), the writer done "
        "%.1f s after the start (%.1f steps/s), writer CPU %.1f s\n  backlog median %.0f, "
        "max %.0f records; producer late by median %.2f ms, max %.1f ms; steps stored %lld "
        "of %d (dropped %lld); detail dropped: none; session %.0f MB\n",
        o.rate, info.attention_tile, info.attention_tile, o.seconds, total, produce_s,
        total / produce_s, done_s, total / done_s, cpu_s, cl::stats::median(backlog),
        *std::max_element(backlog.begin(), backlog.end()), cl::stats::median(late_ms),
        *std::max_element(late_ms.begin(), late_ms.end()), static_cast<long long>(stored), total,
        static_cast<long long>(total - stored), mb);
    return {{"rate", o.rate},
            {"seconds", o.seconds},
            {"produced", total},
            {"produce_steps_per_s", total / produce_s},
            {"writer_steps_per_s", total / done_s},
            {"writer_cpu_s", cpu_s},
            {"backlog_median", cl::stats::median(backlog)},
            {"backlog_max", *std::max_element(backlog.begin(), backlog.end())},
            {"producer_late_ms_max", *std::max_element(late_ms.begin(), late_ms.end())},
            {"stored_steps", stored},
            {"dropped_steps", total - stored},
            {"session_mb", mb}};
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"The instruments at the real models' shape: memory, sessions, capture, replay"};
    Options o;
    app.add_option("--model", o.models, "Model folders (default: random 32-layer models)")
        ->check(CLI::ExistingDirectory);
    app.add_option("--lengths", o.lengths, "Sequence lengths L")->capture_default_str();
    app.add_option("--planned-steps", o.planned_steps, "Steps each run plans (the detail's)")
        ->check(CLI::Range(1, 1 << 16))
        ->capture_default_str();
    app.add_option("--measure-steps", o.measure_steps, "Steps each column runs here")
        ->check(CLI::Range(1, 1 << 16))
        ->capture_default_str();
    app.add_option("--policies", o.policies, "Columns")->capture_default_str();
    app.add_option("--threads", o.threads, "CPU threads")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("--rate", o.rate, "Recorder test: steps/s")
        ->check(CLI::Range(1.0, 1e4))
        ->capture_default_str();
    app.add_option("--seconds", o.seconds, "Recorder test: seconds (0: skip)")
        ->check(CLI::Range(0, 3600))
        ->capture_default_str();
    app.add_option("--work-dir", o.work_dir, "Models and sessions go here")->capture_default_str();
    app.add_option("--json", o.json_file, "Write results as JSON");
    CLI11_PARSE(app, argc, argv);
    try {
        cl::check_json_writable(o.json_file);
        fs::create_directories(o.work_dir);
        cl::set_thread_count(o.threads);
        std::vector<Shape> shapes;
        shapes.reserve(o.models.size());
        for (const auto& m : o.models) shapes.push_back({fs::path(m).filename().string(), m});
        if (shapes.empty()) shapes = default_models(o.work_dir);
        std::vector<int64_t> lengths;
        for (const auto& l : split(o.lengths)) lengths.push_back(std::stoll(l));
        nlohmann::json out = {{"shapes", nlohmann::json::array()}};
        for (const auto& shape : shapes)
            for (int64_t L : lengths) {
                std::printf("%s, L = %lld, %d thread(s):\n", shape.name.c_str(),
                            static_cast<long long>(L), o.threads);
                std::fflush(stdout);
                out["shapes"].push_back(measure_shape(shape, L, o));
            }
        if (o.seconds > 0) out["recorder"] = measure_recorder(o);
        if (!o.json_file.empty()) cl::write_json_file(o.json_file, out);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cachelens-bench-scale: error: %s\n", e.what());
        return 2;
    }
    return 0;
}

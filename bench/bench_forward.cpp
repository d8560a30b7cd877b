// bench_forward: median full-forward latency per denoising step against sequence length, with 1
// and 2 threads, for a model folder. Prints a table and writes JSON. Not a test: numbers only.
//   cachelens-bench-forward [--model DIR] [--lengths 128,256,512,1024] [--repeats 7] [--json FILE]
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/base/stats.h"
#include "engine/model/model.h"
#include "engine/model/transformer.h"

int main(int argc, char** argv) {
    CLI::App app{"Median full-forward latency per step vs sequence length (1 and 2 threads)"};
    std::string model_dir, json_file, lengths_csv = "128,256,320,512,1024";
    int repeats = 7;
    std::vector<int> threads{1, 2};
    app.add_option("--model", model_dir, "Model folder (default: the embedded model)");
    app.add_option("--lengths", lengths_csv, "Comma-separated sequence lengths")
        ->capture_default_str();
    app.add_option("--repeats", repeats, "Timed repeats per point (median reported)")
        ->capture_default_str();
    app.add_option("--threads", threads, "Thread counts to measure")->capture_default_str();
    app.add_option("--json", json_file, "Write the results as JSON");
    CLI11_PARSE(app, argc, argv);
    try {
        std::filesystem::path dir =
            model_dir.empty() ? cl::default_model_dir() : std::filesystem::path(model_dir);
        if (dir.empty())
            throw std::runtime_error("--model: no model given and no embedded default model");
        auto model = cl::Model::load(dir);
        auto& net = model->net();
        std::vector<int64_t> lengths;
        std::stringstream ss(lengths_csv);
        for (std::string x; std::getline(ss, x, ',');) lengths.push_back(std::stoll(x));
        nlohmann::json out = {{"model", model->name()},
                              {"blas_threading", cl::blas_threading()},
                              {"libtorch", cl::libtorch_version()},
                              {"parameters", model->parameter_count()},
                              {"points", nlohmann::json::array()}};
        std::printf(
            "model %s (%.2fM parameters), LibTorch %s, BLAS threading: %s\n%8s %8s %12s %12s "
            "%12s\n",
            model->name().c_str(), model->parameter_count() / 1e6, cl::libtorch_version(),
            cl::blas_threading(), "threads", "length", "median_ms", "min_ms", "GFLOP/s");
        torch::InferenceMode guard;
        for (int t : threads) {
            cl::set_thread_count(t);
            for (int64_t L : lengths) {
                if (L > model->config().max_sequence_length) continue;
                auto ids = torch::randint(0, model->config().vocab_size, {1, L}, torch::kLong);
                net.forward_full(ids);  // warm-up
                std::vector<double> ms;
                for (int r = 0; r < repeats; ++r) {
                    const auto t0 = std::chrono::steady_clock::now();
                    net.forward_full(ids);
                    ms.push_back(std::chrono::duration<double, std::milli>(
                                     std::chrono::steady_clock::now() - t0)
                                     .count());
                }
                std::sort(ms.begin(), ms.end());
                const double median = cl::stats::median(ms);
                const double flops =
                    model->config().n_layers * cl::detail::layer_flops(model->config(), L, L) +
                    cl::detail::head_flops(model->config(), L);
                std::printf("%8d %8lld %12.2f %12.2f %12.1f\n", t, (long long)L, median, ms.front(),
                            flops / median / 1e6);
                out["points"].push_back({{"threads", t},
                                         {"length", L},
                                         {"median_ms", median},
                                         {"min_ms", ms.front()},
                                         {"repeats", repeats},
                                         {"gflops", flops / median / 1e6}});
            }
        }
        if (!json_file.empty()) std::ofstream(json_file) << out.dump(2) << '\n';
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cachelens-bench-forward: error: %s\n", e.what());
        return 2;
    }
    return 0;
}

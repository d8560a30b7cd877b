// bench_forward: median full-forward latency per denoising step against sequence length, with 1
// and 2 threads, for a model folder, on the CPU or a CUDA device, in fp32 or bf16; beside it the
// FLOP floor: the forward's FLOPs at the rate this machine measures for one large matrix product
// in the same type (the best a forward made of matrix products could do); on the CPU also the
// sampler's row pass against its tensor ops over a step's rows of logits. Prints tables and
// writes JSON. Not a test: numbers only.
//   cachelens-bench-forward [--model DIR] [--lengths 128,256,512,1024] [--repeats 7]
//                           [--device cpu|cuda[:N]] [--dtype auto|fp32|bf16] [--json FILE]
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/base/cpu_clones.h"
#include "engine/base/json_file.h"
#include "engine/base/stats.h"
#include "engine/cuda/device_memory.h"
#include "engine/generation/sampler.h"
#include "engine/machine/core_speeds.h"
#include "engine/model/model.h"
#include "engine/model/transformer.h"

namespace {

struct Options {
    std::string model_dir, json_file, lengths_csv = "128,256,320,512,1024";
    std::string device = "cpu", dtype = "auto";
    int repeats = 7;
    std::vector<int> threads{1, 2};
};

// Waits for the device's queued work, so that a host clock times it (a no-op on the CPU).
void wait_for(const torch::Device& device) {
    if (device.is_cuda()) cl::cuda::synchronize();
}

// Warm-up before a point's timed runs: at least this long, at least one run. A thread count's
// first runs stay slow for several milliseconds (OpenMP starting its workers, the kernel spreading
// them over the cores): after one warm-up run the first point measured at 2 threads took a median
// 4.4-6.0 ms where the same 64-token forward took 2.0 ms once measured again (AVX2 EPYC).
constexpr double kWarmUpMs = 100.0;

// Wall times of fn() over `repeats` runs after the warm-up, in ms, ascending.
template <typename Fn>
std::vector<double> time_ms(const torch::Device& device, int repeats, Fn fn) {
    const auto start = std::chrono::steady_clock::now();
    do {
        fn();
        wait_for(device);
    } while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                 .count() < kWarmUpMs);
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        wait_for(device);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
    }
    std::sort(ms.begin(), ms.end());
    return ms;
}

// The machine's rate for one large square product in the model's type, FLOP per ms: 8192 on a
// GPU (as the reference figure), 1024 on the CPU.
double matmul_rate(const torch::Device& device, torch::ScalarType dtype) {
    const int64_t n = device.is_cuda() ? 8192 : 1024;
    auto opts = torch::TensorOptions().dtype(dtype).device(device);
    auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);  // (n, n)
    const auto ms = time_ms(device, 5, [&] { (void)torch::matmul(a, b); });
    return 2.0 * static_cast<double>(n) * n * n / cl::stats::median(ms);
}

std::vector<int64_t> parse_lengths(const std::string& csv) {
    std::vector<int64_t> lengths;
    std::stringstream ss(csv);
    for (std::string x; std::getline(ss, x, ',');) lengths.push_back(std::stoll(x));
    return lengths;
}

// The sampler over M rows of V float32 logits (argmax, low confidence, top-5: the row path) and
// the tensor ops it replaced, at each thread count: a fast-dual step's 32 rows, a dllm-cache
// step's 224.
void bench_sampler(const Options& o, int64_t V, nlohmann::json& out) {
    std::printf(
        "sampler over V = %lld logits a row (float64 softmax, top-5)\n%8s %8s %12s %12s %10s\n",
        (long long)V, "threads", "rows", "row_us", "tensor_us", "ns/logit");
    const cl::GenerationConfig cfg;
    cl::detail::SamplerInputs in;
    in.cfg = &cfg;
    out["sampler"] = nlohmann::json::array();
    for (int t : o.threads) {
        cl::set_thread_count(t);
        for (int64_t M : {int64_t{32}, int64_t{224}}) {
            const auto logits = torch::randn({M, V}) * 3.0;  // (M, V) float32
            std::vector<int64_t> positions(static_cast<size_t>(M));
            std::iota(positions.begin(), positions.end(), 0);
            const auto cpu = torch::Device(torch::kCPU);
            const double row = cl::stats::median(
                time_ms(cpu, o.repeats, [&] { (void)cl::detail::sample(logits, positions, in); }));
            const double tensor = cl::stats::median(time_ms(cpu, o.repeats, [&] {
                (void)cl::detail::sample_with_tensors(logits, positions, in);
            }));
            const double ns = row * 1e6 / static_cast<double>(M * V);
            std::printf("%8d %8lld %12.1f %12.1f %10.2f\n", t, (long long)M, row * 1e3,
                        tensor * 1e3, ns);
            out["sampler"].push_back({{"threads", t},
                                      {"rows", M},
                                      {"vocab", V},
                                      {"row_path_us", row * 1e3},
                                      {"tensor_ops_us", tensor * 1e3},
                                      {"ns_per_logit", ns}});
        }
    }
}

void run(const Options& o) {
    cl::check_json_writable(o.json_file);
    std::filesystem::path dir =
        o.model_dir.empty() ? cl::default_model_dir() : std::filesystem::path(o.model_dir);
    if (dir.empty())
        throw std::runtime_error("--model: no model given and no embedded default model");
    cl::LoadOptions load;
    load.device = o.device;
    load.dtype = o.dtype;
    auto model = cl::Model::load(dir, load);
    auto& net = model->net();
    const auto device = net.device();
    torch::InferenceMode guard;
    cl::choose_blas_kernels();  // before the floor's products: the kernels every point runs
    const double rate = matmul_rate(device, net.dtype());
    nlohmann::json out = {{"model", model->name()},
                          {"device", model->device()},
                          {"dtype", model->dtype()},
                          {"blas_threading", cl::blas_threading()},
                          {"blas_kernels", cl::blas_kernels()},
                          {"row_kernels", cl::cpu::vector_isa()},
                          {"libtorch", cl::libtorch_version()},
                          {"parameters", model->parameter_count()},
                          {"matmul_tflops", rate / 1e9},
                          {"points", nlohmann::json::array()}};
    std::printf(
        "model %s (%.2fM parameters) on %s in %s, LibTorch %s, BLAS threading: %s, OpenBLAS "
        "kernels: %s, row kernels %s\n"
        "matrix product rate (FLOP floor): %.2f TFLOP/s\n%8s %8s %12s %12s %12s %10s %8s\n",
        model->name().c_str(), model->parameter_count() / 1e6, model->device().c_str(),
        model->dtype().c_str(), cl::libtorch_version(), cl::blas_threading(),
        cl::blas_kernels().c_str(), cl::cpu::vector_isa(), rate / 1e9, "threads", "length",
        "median_ms", "min_ms", "GFLOP/s", "floor_ms", "x_floor");
    const auto before = device.is_cuda() ? std::vector<cl::machine::CoreSpeed>{}
                                         : cl::machine::measure_core_speeds();
    for (int t : device.is_cuda() ? std::vector<int>{1} : o.threads) {
        cl::set_thread_count(t);
        for (int64_t L : parse_lengths(o.lengths_csv)) {
            if (L > model->config().max_sequence_length) continue;
            auto ids = torch::randint(0, model->config().vocab_size, {1, L},
                                      torch::TensorOptions().dtype(torch::kLong).device(device));
            const auto ms = time_ms(device, o.repeats, [&] { (void)net.forward_full(ids); });
            const double median = cl::stats::median(ms);
            const double flops =
                model->config().n_layers * cl::detail::layer_flops(model->config(), L, L) +
                cl::detail::head_flops(model->config(), L);
            const double floor = flops / rate;
            std::printf("%8d %8lld %12.2f %12.2f %12.1f %10.3f %8.2f\n", t, (long long)L, median,
                        ms.front(), flops / median / 1e6, floor, median / floor);
            out["points"].push_back({{"threads", t},
                                     {"length", L},
                                     {"median_ms", median},
                                     {"min_ms", ms.front()},
                                     {"repeats", o.repeats},
                                     {"gflops", flops / median / 1e6},
                                     {"floor_ms", floor},
                                     {"times_floor", median / floor}});
        }
    }
    if (!device.is_cuda()) {
        const auto after = cl::machine::measure_core_speeds();
        std::printf("core speed (row-kernel probe on each CPU): %s\n",
                    cl::machine::before_and_after(before, after).c_str());
        out["core_speeds"] = {{"before", cl::machine::speeds_json(before)},
                              {"after", cl::machine::speeds_json(after)}};
        bench_sampler(o, model->config().vocab_size, out);
    }
    if (!o.json_file.empty()) cl::write_json_file(o.json_file, out);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Median full-forward latency per step vs sequence length, against the FLOP floor"};
    Options o;
    app.add_option("--model", o.model_dir, "Model folder (default: the embedded model)");
    app.add_option("--lengths", o.lengths_csv, "Comma-separated sequence lengths")
        ->capture_default_str();
    app.add_option("--repeats", o.repeats, "Timed repeats per point (median reported)")
        ->capture_default_str()
        ->check(CLI::Range(1, 10000));
    app.add_option("--threads", o.threads, "CPU thread counts to measure")->capture_default_str();
    app.add_option("--device", o.device, "cpu, cuda or cuda:N")->capture_default_str();
    app.add_option("--dtype", o.dtype, "auto (bf16 on CUDA, fp32 on the CPU), fp32 or bf16")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "fp32", "bf16"}));
    app.add_option("--json", o.json_file, "Write the results as JSON");
    CLI11_PARSE(app, argc, argv);
    try {
        run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cachelens-bench-forward: error: %s\n", e.what());
        return 2;
    }
    return 0;
}

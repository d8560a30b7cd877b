#include "engine/model/model.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>

#include <torch/version.h>

#include "engine/base/assets.h"
#include "engine/base/errors.h"
#include "engine/base/process_memory.h"
#include "engine/cuda/device_query.h"
#include "engine/model/architecture.h"
#include "engine/model/model_folder.h"
#include "engine/model/safetensors.h"
#include "engine/model/transformer.h"

namespace cl {

struct Model::Impl {
    std::filesystem::path dir;
    ModelConfig config;
    GenerationDefaults defaults;
    std::unique_ptr<Tokenizer> tokenizer;
    std::unique_ptr<detail::Transformer> net;
    const detail::Architecture* arch = nullptr;
    std::vector<TensorSummary> tensors;
    std::string hash;
    int32_t eot = -1;
};

Model::Model() : m_impl(std::make_unique<Impl>()) {}
Model::~Model() = default;

namespace {

torch::Tensor to_float_tensor(const SafetensorsFile& f, const TensorInfo& t) {
    torch::ScalarType st;
    switch (t.dtype) {
        case DType::F32:
            st = torch::kFloat32;
            break;
        case DType::F16:
            st = torch::kFloat16;
            break;
        case DType::BF16:
            st = torch::kBFloat16;
            break;
        default:  // check_model_folder refused the folder before
            throw std::logic_error("tensor '" + t.name + "' has a non-float dtype");
    }
    auto view = torch::from_blob(const_cast<std::byte*>(f.data(t)), t.shape,
                                 torch::TensorOptions().dtype(st));
    return view.to(torch::kFloat32).clone();
}

// The engine holds weights as float32 on the CPU: a checkpoint bigger than the memory left is
// refused with the figures before a byte is read (it was killed by the OOM killer).
// LoadOptions::dtype for a device.
torch::ScalarType resolve_dtype(const std::string& dtype, const torch::Device& device) {
    if (dtype == "fp32") return torch::kFloat32;
    if (dtype == "bf16") return torch::kBFloat16;
    if (dtype == "auto") return device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
    throw InputError(Setting{"dtype"},
                     "unknown dtype '" + dtype + "' (expected auto, fp32 or bf16)");
}

// where: "in memory" or "on cuda:N"; available <= 0: unknown, not checked.
void check_weights_fit(const std::filesystem::path& dir, const ModelConfig& c, double available,
                       const std::string& where, torch::ScalarType dtype) {
    const double need =
        (dtype == torch::kBFloat16 ? 2.0 : 4.0) * static_cast<double>(c.parameter_count());
    if (available <= 0 || need <= 0.9 * available) return;
    char text[200];
    std::snprintf(text, sizeof text, "the weights need %.2f GB %s (%s) and %.2f GB is available",
                  need / 1e9, where.c_str(), dtype == torch::kBFloat16 ? "bfloat16" : "float32",
                  available / 1e9);
    throw InputError(dir, text);
}

// Free memory of a CUDA device as its runtime reports it; 0 where unknown.
double cuda_free_bytes(const torch::Device& device) {
    return static_cast<double>(cuda::free_bytes(device.has_index() ? device.index() : 0));
}

}  // namespace

std::shared_ptr<Model> Model::load(const std::filesystem::path& dir, const LoadOptions& options) {
    if (!std::filesystem::is_directory(dir)) throw InputError(dir, "model folder not found");
    std::shared_ptr<Model> model(new Model());
    Impl& m = *model->m_impl;
    m.dir = dir;
    // Everything about the folder but the weights' values is checked before any is read.
    ModelFolder folder = check_model_folder(dir);
    m.config = folder.config;
    m.tensors = std::move(folder.tensors);
    m.arch = detail::find_architecture(m.config.architecture);
    m.defaults = load_generation_defaults(dir);
    const auto tok_file = dir / "tokenizer.json";
    if (!std::filesystem::exists(tok_file)) throw InputError(tok_file, "tokenizer.json not found");
    m.tokenizer = Tokenizer::load(tok_file);
    if (m.tokenizer->vocab_size() > m.config.vocab_size)
        throw InputError(tok_file, "tokenizer has " + std::to_string(m.tokenizer->vocab_size()) +
                                       " ids but the model's vocabulary is " +
                                       std::to_string(m.config.vocab_size));
    if (!m.arch->end_of_turn.empty())
        if (auto eot = m.tokenizer->token_to_id(m.arch->end_of_turn)) m.eot = *eot;

    torch::Device device(torch::kCPU);
    if (options.device != "cpu") {
        if (options.device.rfind("cuda", 0) != 0)
            throw InputError(Setting{"device"},
                             "unknown device '" + options.device + "' (expected cpu or cuda)");
        const auto why = cuda_unavailable_reason();
        if (!why.empty()) throw InputError(Setting{"device"}, "cuda: " + why);
        device = torch::Device(options.device);
        // "cuda" is the current device, which the engine never changes from 0: named with its
        // index, as the tensors placed there name theirs (Model::device, the traces).
        if (!device.has_index()) device = torch::Device(device.type(), 0);
    }

    const auto dtype = resolve_dtype(options.dtype, device);
    if (device.is_cpu())
        check_weights_fit(dir, m.config, available_memory_bytes(), "in memory", dtype);
    else
        check_weights_fit(dir, m.config, cuda_free_bytes(device), "on " + device.str(), dtype);
    const ModelConfig& c = m.config;
    detail::TransformerWeights w;
    w.layers.resize(static_cast<size_t>(c.n_layers));
    const auto slots = m.arch->weight_slots(c, w);
    std::map<std::string, torch::Tensor> loaded;
    for (const auto& t : m.tensors) loaded[t.name] = torch::Tensor();
    size_t done = 0;
    for (const auto& file : folder.weight_files) {
        auto st = SafetensorsFile::open(file);
        for (const auto& t : st->tensors()) {
            if (!loaded.count(t.name)) continue;  // not the architecture's (checked above)
            loaded[t.name] = to_float_tensor(*st, t).to(dtype).to(device);
            if (options.progress && !options.progress(++done, m.tensors.size()))
                throw LoadCancelled();
        }
    }
    for (const auto& slot : slots) *slot.tensor = loaded[slot.name];
    if (c.weight_tying) w.head = w.wte;
    if (device.is_cpu()) w.store_projections_column_major();
    m.hash = cl::content_hash(folder);
    m.net = std::make_unique<detail::Transformer>(c, std::move(w), device);
    return model;
}

const ModelConfig& Model::config() const {
    return m_impl->config;
}
const Tokenizer& Model::tokenizer() const {
    return *m_impl->tokenizer;
}
const GenerationDefaults& Model::generation_defaults() const {
    return m_impl->defaults;
}
const std::filesystem::path& Model::directory() const {
    return m_impl->dir;
}
std::string Model::name() const {
    auto p = m_impl->dir;
    if (p.filename().empty()) p = p.parent_path();
    return p.filename().string();
}
std::string Model::content_hash() const {
    return m_impl->hash;
}
std::string Model::device() const {
    return m_impl->net->device().str();
}

std::string Model::dtype() const {
    return m_impl->net->dtype() == torch::kBFloat16 ? "bf16" : "fp32";
}
int64_t Model::parameter_count() const {
    return m_impl->config.parameter_count();
}
int64_t Model::weight_bytes_in_memory() const {
    int64_t bytes = 0;
    for (auto& t : m_impl->net->parameters())
        bytes += t.numel() * static_cast<int64_t>(t.element_size());
    return bytes;
}
const std::vector<TensorSummary>& Model::tensors() const {
    return m_impl->tensors;
}
int32_t Model::eot_id() const {
    return m_impl->eot;
}
detail::Transformer& Model::net() const {
    return *m_impl->net;
}
bool Model::has_chat_template() const {
    for (const auto& token : m_impl->arch->chat_tokens)
        if (!m_impl->tokenizer->token_to_id(token)) return false;
    return true;
}
std::string Model::apply_chat_template(const std::string& user_message) const {
    return m_impl->arch->chat_template(*m_impl->tokenizer, user_message);
}

int64_t Model::system_turn_rows(const std::vector<int32_t>& prompt) const {
    const std::string& turn = m_impl->arch->system_turn;
    if (turn.empty() || !has_chat_template()) return 0;
    const auto ids = m_impl->tokenizer->encode(turn);
    const bool opens_with =
        ids.size() <= prompt.size() && std::equal(ids.begin(), ids.end(), prompt.begin());
    return opens_with ? static_cast<int64_t>(ids.size()) : 0;
}

std::string cuda_unavailable_reason() {
    if (torch::cuda::is_available()) return "";
    if (!at::hasCUDA())
        return "this LibTorch has no CUDA (Debian's libtorch-dev is CPU-only); build with "
               "scripts/setup --cuda";
    const auto list = cuda::list_devices();
    return "LibTorch has CUDA but sees no GPU" +
           (list.why_none.empty() ? std::string() : " (" + list.why_none + ")");
}

void tune_allocator() {
#if defined(__GLIBC__)
    // Every forward allocates and frees tensors of a few MB ((H, R, L) attention scores). With
    // glibc's defaults such blocks are either mmap'ed or trimmed back to the OS when freed, so each
    // step page-faults them in again (an attention's QK^T + softmax ran several times slower with
    // the defaults). Keep blocks below 32 MiB in the heap and only return free memory above 256 MiB
    // to the OS.
    static std::once_flag once;
    std::call_once(once, [] {
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, 256 << 20);
    });
#endif
}

const char* libtorch_version() {
    return TORCH_VERSION;
}

void set_thread_count(int threads) {
    tune_allocator();
    choose_blas_kernels();
    if (threads < 1) threads = 1;
    set_blas_threads(threads);
    // OpenBLAS built on OpenMP (what scripts/setup selects) shares LibTorch's OpenMP pool, so the
    // element-wise ops, softmax and norms get the threads too without a second pool
    // (cachelens-bench-forward --threads 1 2 measures the gain). Beside OpenBLAS's pthreads
    // pool, a LibTorch pool of N threads oversubscribes the cores (a 64-token forward 14x
    // slower), so LibTorch keeps one thread there and only the matrix products run in parallel.
    // A LibTorch with its own BLAS (PyPI's, on MKL) runs everything on its pool.
    torch::set_num_threads(std::string_view(blas_threading()) == "pthreads" ? 1 : threads);
}

std::filesystem::path default_model_dir() {
    const char* env = std::getenv("CACHELENS_MODEL");
    if (env && *env) return env;
    const auto assets = assets_dir();
    if (assets.empty()) return {};
    const auto dir = assets / "models" / "cachelens-tiny";
    return std::filesystem::exists(dir / "config.json") ? dir : std::filesystem::path();
}

}  // namespace cl

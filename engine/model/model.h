// Model: a LLaDA-architecture checkpoint loaded from a Hugging Face-style folder
// (config.json, model.safetensors or a sharded model.safetensors.index.json, tokenizer.json).
//
// This header is torch-free (pimpl) so the app, viz and CLI front-ends compile fast; the tensor
// code lives in engine/model/transformer.h, which only engine sources include.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kernels/openblas.h"  // what set_thread_count sets; what the benches name
#include "engine/model/model_config.h"
#include "engine/model/model_folder.h"
#include "engine/tokenizer/tokenizer.h"

namespace cl {

namespace detail {
class Transformer;
}

struct LoadOptions {
    std::string device = "cpu";  // "cpu" or "cuda" / "cuda:N"
    // Weights and activations: "fp32", "bf16", or "auto" (bf16 on a CUDA device, fp32 on the CPU).
    // The sampler works in float64 either way.
    std::string dtype = "auto";
    // Called after each weight tensor is read (tensors done, tensors in all); returning false
    // stops the load with LoadCancelled. Runs on the loading thread.
    std::function<bool(size_t done, size_t total)> progress;
};

// Model::load stopped because LoadOptions::progress asked it to.
struct LoadCancelled : std::runtime_error {
    LoadCancelled() : std::runtime_error("loading cancelled") {}
};

class Model {
public:
    // Throws InputError naming the file and the problem (missing files, bad JSON, wrong shapes).
    static std::shared_ptr<Model> load(const std::filesystem::path& dir,
                                       const LoadOptions& options = {});
    ~Model();

    const ModelConfig& config() const;
    const Tokenizer& tokenizer() const;
    const GenerationDefaults& generation_defaults() const;
    const std::filesystem::path& directory() const;
    std::string name() const;          // folder name
    std::string content_hash() const;  // 16 hex digits over the weight files
    std::string device() const;        // "cpu" or "cuda:0"
    std::string dtype() const;         // "fp32" or "bf16"
    int64_t parameter_count() const;
    int64_t weight_bytes_in_memory() const;
    const std::vector<TensorSummary>& tensors() const;
    // The architecture's end-of-turn token when the tokenizer has it, else -1.
    int32_t eot_id() const;
    // Whether the tokenizer has every special token of the architecture's chat format.
    bool has_chat_template() const;
    // The user message in the architecture's chat format (special tokens as text).
    std::string apply_chat_template(const std::string& user_message) const;
    // How many rows the chat template's system turn takes at the start of `prompt` (token ids): 0
    // when the architecture has none, the tokenizer lacks its tokens, or the prompt does not open
    // with it (a prompt encoded without the template).
    int64_t system_turn_rows(const std::vector<int32_t>& prompt) const;

    detail::Transformer& net() const;

private:
    Model();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// Describes why `--device cuda` cannot be used here, or returns "" when it can.
std::string cuda_unavailable_reason();
// Keeps freed tensor memory in the process (glibc malloc thresholds) so that steps do not
// page-fault their temporaries in again. Idempotent; set_thread_count calls it.
void tune_allocator();
// Sets OpenBLAS's threads and LibTorch's intra-op threads, except beside OpenBLAS's pthreads
// build, where LibTorch keeps one (two pools oversubscribe the cores); PyPI's LibTorch brings its
// own BLAS (MKL) on its own pool. Tunes the allocator and chooses OpenBLAS's kernels first
// (choose_blas_kernels), as every front end calls this at start.
void set_thread_count(int threads);
// The LibTorch the engine was built against, e.g. "1.13.0" (Debian) or "2.15.0" (PyPI's wheel).
const char* libtorch_version();
// The folder of the embedded default model (assets/models/<name>), or "" if it is not present.
std::filesystem::path default_model_dir();

}  // namespace cl

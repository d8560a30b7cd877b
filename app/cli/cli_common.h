// Options shared by the cachelens-cli subcommands (ARCHITECTURE.md "Command-line contract").
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <vector>

#include "engine/generation/generation_config.h"
#include "engine/model/model.h"
#include "engine/trace/attention_detail.h"

namespace cl::cli {

// Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad input.
enum ExitCode { kOk = 0, kRuntimeFailure = 1, kBadInput = 2 };

struct ModelOptions {
    std::string model_dir;  // empty = embedded default
    std::string device = "cpu";
    std::string dtype = "auto";
    int threads = 1;
    std::string kernels;  // "" = CACHELENS_KERNELS (engine/kernels/kernel_choice.h)
    // both_kernel_sets: --kernels may also be "both" (a command that runs its work once per set
    // and sets `kernels` to each before load()).
    void add_to(CLI::App& app, bool both_kernel_sets = false);
    // Resolves the folder, sets threads and the kernel set, loads. Throws InputError.
    std::shared_ptr<Model> load() const;
    // --model, or the embedded default model's folder. Throws InputError when neither exists.
    std::filesystem::path folder() const;
};

// `--also-model DIR` (repeatable): further model folders that run the same work as --model (a
// masked and a uniform-noise model side by side). models() is --model first, then those.
struct AlsoModelOptions {
    std::vector<std::string> dirs;
    void add_to(CLI::App& app, const std::string& what);
    std::vector<ModelOptions> models(const ModelOptions& first) const;
};

struct PromptOptions {
    std::string prompt;
    std::string prompt_file;
    bool no_chat_template = false;
    void add_to(CLI::App& app);
    // Throws InputError when neither or both are given, or the file is unreadable / not UTF-8.
    std::string text(const std::string& fallback = "") const;
};

struct SamplerOptions {
    int64_t gen_length = -1, block_length = -1, steps = -1;  // -1 = model default
    double temperature = 0, cfg_scale = 0, threshold = 0, factor = 0, certainty_sigma = 10;
    std::string remasking = "low_confidence";
    std::string schedule = "even";
    double top_p = 1.0, alg_temp = 0;
    int64_t top_k = 0;
    std::string fresh_prefix = "0";
    std::string update_rule = "adaptive";
    bool certainty_prior = false, logits_eos_inf = false, confidence_eos_eot_inf = false;
    uint64_t seed = 0;
    void add_to(CLI::App& app);
    GenerationConfig resolve(const Model& model) const;
};

// --param KEY=VALUE (repeatable). With several policies, KEY may be policy.key.
struct ParamOptions {
    std::vector<std::string> raw;
    void add_to(CLI::App& app);
    // Parameters that apply to `policy`. Throws InputError on malformed entries.
    std::map<std::string, double> for_policy(const std::string& policy,
                                             bool allow_unqualified = true) const;
};

// --attention-bits 4|8 for commands that --record a session (sessions::WriterOptions).
void add_attention_bits_option(CLI::App& app, int& bits);

// The recorded attention's level of detail (engine/trace/attention_detail.h): --attention-budget
// MB (a run's head-mean maps before compression; the engine pools them into tiles to fit) and
// --full-attention-layers 0,12 (layers never pooled).
struct AttentionDetailOptions {
    double budget_mb = trace::kDefaultAttentionBudgetBytes / 1e6;
    std::string full_layers;
    void add_to(CLI::App& app);
    double budget_bytes() const { return budget_mb * 1e6; }
    // Throws InputError naming --full-attention-layers on a value that is not a layer index.
    std::set<int32_t> full_resolution_layers() const;
    // Throws InputError naming --full-attention-layers where a layer is past the model's.
    void check_layers_of(const Model& model) const;
};

std::vector<std::string> split_list(const std::string& csv);
// The whole numbers of a comma-separated list, each in [lo, hi]; throws InputError
// "OPTION: 'ITEM' is not WHAT" at the first that is not.
std::vector<int> whole_numbers(const std::string& csv, const std::string& option, int lo, int hi,
                               const std::string& what);
std::string read_text_file(const std::string& path);  // throws InputError

}  // namespace cl::cli

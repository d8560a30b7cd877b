#include "app/cli/cli_common.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/base/errors.h"
#include "engine/kernels/kernel_choice.h"
#include "engine/tokenizer/tokenizer.h"

namespace cl::cli {

void ModelOptions::add_to(CLI::App& app, bool both_kernel_sets) {
    app.add_option(
        "--model", model_dir,
        "Model folder (config.json, safetensors, tokenizer.json); default: the embedded model");
    app.add_option("--device", device, "cpu, cuda or cuda:N")->capture_default_str();
    app.add_option("--dtype", dtype,
                   "Weights and activations: auto (bf16 on CUDA, fp32 on the CPU), fp32 or bf16")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "fp32", "bf16"}));
    app.add_option("--threads", threads,
                   "CPU threads (OpenBLAS, and LibTorch's ops when OpenBLAS runs on OpenMP, as "
                   "setup selects)")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    const std::string both = both_kernel_sets ? ", or both (each in turn)" : "";
    app.add_option("--kernels", kernels,
                   "fast (the row kernels) or reference (every op as plain LibTorch ops)" + both +
                       "; default: $CACHELENS_KERNELS, else fast")
        ->check(both_kernel_sets ? CLI::IsMember({"fast", "reference", "both"})
                                 : CLI::IsMember({"fast", "reference"}));
}

std::filesystem::path ModelOptions::folder() const {
    std::filesystem::path dir = model_dir;
    if (dir.empty()) {
        dir = default_model_dir();
        if (dir.empty())
            throw InputError(
                "--model: no model given and the embedded default model (assets/models/) is "
                "missing");
    }
    return dir;
}

std::shared_ptr<Model> ModelOptions::load() const {
    set_thread_count(threads);
    if (!kernels.empty()) set_kernel_set(parse_kernel_set(kernels));
    (void)kernel_set();  // a bad CACHELENS_KERNELS is refused here, before any work
    LoadOptions opts;
    opts.device = device;
    opts.dtype = dtype;
    return Model::load(folder(), opts);
}

void AlsoModelOptions::add_to(CLI::App& app, const std::string& what) {
    app.add_option("--also-model", dirs, "Also " + what + " on this model folder (repeatable)");
}

std::vector<ModelOptions> AlsoModelOptions::models(const ModelOptions& first) const {
    std::vector<ModelOptions> out{first};
    for (const auto& dir : dirs) {
        out.push_back(first);
        out.back().model_dir = dir;
    }
    return out;
}

void PromptOptions::add_to(CLI::App& app) {
    app.add_option("--prompt", prompt, "Prompt text");
    app.add_option("--prompt-file", prompt_file, "Read the prompt from a UTF-8 text file");
    app.add_flag("--no-chat-template", no_chat_template,
                 "Encode the prompt as is, without LLaDA's chat template");
}

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "cannot open file");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string PromptOptions::text(const std::string& fallback) const {
    if (!prompt.empty() && !prompt_file.empty())
        throw InputError("--prompt and --prompt-file cannot both be given");
    std::string t = prompt;
    if (!prompt_file.empty()) {
        t = read_text_file(prompt_file);
        if (!is_valid_utf8(t)) throw InputError(prompt_file, "not valid UTF-8");
    } else if (!is_valid_utf8(t)) {
        throw InputError("--prompt: not valid UTF-8");
    }
    if (t.empty()) t = fallback;
    if (t.empty()) throw InputError("--prompt: no prompt given (use --prompt or --prompt-file)");
    return t;
}

void SamplerOptions::add_to(CLI::App& app) {
    app.add_option("--gen-length", gen_length,
                   "Generated tokens G (default: the model's generation defaults)");
    app.add_option("--block-length", block_length, "Block length B (G % B == 0)");
    app.add_option("--steps", steps, "Denoising steps T (a multiple of G / B)");
    app.add_option("--temperature", temperature, "Gumbel-max temperature (float64); 0 = argmax")
        ->capture_default_str();
    app.add_option("--cfg-scale", cfg_scale, "Classifier-free guidance scale; 0 = off")
        ->capture_default_str();
    app.add_option("--remasking", remasking,
                   "Confidence: low_confidence, random, topk_margin or entropy (Dream's "
                   "maskgit_plus and origin are low_confidence and random)")
        ->capture_default_str();
    app.add_option("--schedule", schedule,
                   "Masks committed per step: even (LLaDA) or dream (int(n * (1 - s/t)))")
        ->capture_default_str();
    app.add_option("--top-p", top_p, "Sample from the smallest token set holding top-p (1 = all)")
        ->capture_default_str();
    app.add_option("--top-k", top_k, "Sample from the k most likely tokens (0 = all)")
        ->capture_default_str();
    app.add_option("--alg-temp", alg_temp,
                   "Draw the committed positions by softmax(confidence / alg-temp) (Dream; 0 = the "
                   "most confident)")
        ->capture_default_str();
    app.add_option("--update-rule", update_rule,
                   "Uniform-noise models: adaptive (largest p(top) - p(current)) or confidence")
        ->capture_default_str();
    app.add_option(
        "--threshold", threshold,
        "Parallel decoding: commit every in-block mask with confidence >= threshold (0 = off)");
    app.add_option("--factor", factor,
                   "Parallel decoding: commit top-n while c_n >= 1 - factor/(n+1) (0 = off)");
    app.add_flag("--certainty-prior", certainty_prior,
                 "Rank by confidence x local density of decoded tokens (d2Cache)");
    app.add_option("--certainty-sigma", certainty_sigma, "Width of the certainty prior kernel")
        ->capture_default_str();
    app.add_flag("--logits-eos-inf", logits_eos_inf, "Never predict EOS");
    app.add_flag("--confidence-eos-eot-inf", confidence_eos_eot_inf,
                 "Predicted EOS/EoT get confidence 0 (committed last)");
    app.add_option("--fresh-prefix", fresh_prefix,
                   "Recompute the first N prompt rows at every step under every policy; 'system': "
                   "the chat template's system turn (20 rows on the Dream model, 0 on LLaDA)")
        ->capture_default_str();
    app.add_option("--seed", seed, "Random seed")->capture_default_str();
}

GenerationConfig SamplerOptions::resolve(const Model& model) const {
    const auto& d = model.generation_defaults();
    GenerationConfig c;
    c.gen_length = gen_length > 0 ? gen_length : d.gen_length;
    c.block_length = block_length > 0 ? block_length : std::min(d.block_length, c.gen_length);
    c.steps = steps > 0 ? steps : (gen_length > 0 ? c.gen_length : d.steps);
    if (gen_length == 0) throw InputError("--gen-length: must be positive");
    if (block_length == 0) throw InputError("--block-length: must be positive");
    if (steps == 0) throw InputError("--steps: must be positive");
    c.temperature = temperature;
    c.cfg_scale = cfg_scale;
    c.remasking = parse_remasking(remasking);
    c.schedule = parse_transfer_schedule(schedule);
    c.top_p = top_p;
    c.top_k = top_k;
    c.alg_temp = alg_temp;
    c.update_rule = parse_update_rule(update_rule);
    c.threshold = threshold;
    c.factor = factor;
    c.certainty_prior = certainty_prior;
    c.certainty_sigma = certainty_sigma;
    c.logits_eos_inf = logits_eos_inf;
    c.confidence_eos_eot_inf = confidence_eos_eot_inf;
    c.fresh_prefix = parse_fresh_prefix(fresh_prefix);
    c.seed = seed;
    return c;
}

void add_attention_bits_option(CLI::App& app, int& bits) {
    app.add_option("--attention-bits", bits,
                   "With --record: attention precision, 4 (default, smaller) or 8 bits")
        ->check(CLI::IsMember({4, 8}))
        ->capture_default_str();
}

void AttentionDetailOptions::add_to(CLI::App& app) {
    app.add_option("--attention-budget", budget_mb,
                   "With --record: MB a run's head-mean attention maps may take; past it they are "
                   "pooled into tiles (8x8 tiles: 1/64 of the bytes)")
        ->check(CLI::Range(0.001, 1e6))
        ->capture_default_str();
    app.add_option("--full-attention-layers", full_layers,
                   "With --record: layers whose attention maps are never pooled (0,12)");
}

std::set<int32_t> AttentionDetailOptions::full_resolution_layers() const {
    const auto layers = whole_numbers(full_layers, "--full-attention-layers", 0, 1 << 20,
                                      "a layer index (expected e.g. 0,12)");
    return {layers.begin(), layers.end()};
}

void AttentionDetailOptions::check_layers_of(const Model& model) const {
    const int64_t layers = model.config().n_layers;
    for (int32_t l : full_resolution_layers())
        if (l >= layers)
            throw InputError("--full-attention-layers: layer " + std::to_string(l) + " is past " +
                             model.name() + "'s " + std::to_string(layers) + " layers (0.." +
                             std::to_string(layers - 1) + ")");
}

void ParamOptions::add_to(CLI::App& app) {
    app.add_option(
        "--param", raw,
        "Policy parameter KEY=VALUE (repeatable; policy.key=value with several policies)");
}

std::map<std::string, double> ParamOptions::for_policy(const std::string& policy,
                                                       bool allow_unqualified) const {
    std::map<std::string, double> out;
    for (const auto& entry : raw) {
        const auto eq = entry.find('=');
        if (eq == std::string::npos || eq == 0)
            throw InputError("--param: expected KEY=VALUE, got '" + entry + "'");
        std::string key = entry.substr(0, eq);
        const std::string value = entry.substr(eq + 1);
        double v = 0;
        try {
            size_t used = 0;
            v = std::stod(value, &used);
            if (used != value.size()) throw std::invalid_argument("trailing");
        } catch (const std::exception&) {
            throw InputError("--param: value of '" + key + "' is not a number: '" + value + "'");
        }
        // "policy.key" applies to that policy only; a bare key applies to every policy that has it.
        const auto dot = key.find('.');
        if (dot != std::string::npos) {
            if (key.substr(0, dot) != policy) continue;
            key = key.substr(dot + 1);
        } else if (!allow_unqualified) {
            continue;
        }
        out[key] = v;
    }
    return out;
}

std::vector<int> whole_numbers(const std::string& csv, const std::string& option, int lo, int hi,
                               const std::string& what) {
    std::vector<int> out;
    for (const auto& item : split_list(csv)) {
        size_t used = 0;
        int value = lo - 1;
        try {
            value = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != item.size() || value < lo || value > hi)
            throw InputError(option + ": '" + item + "' is not " + what);
        out.push_back(value);
    }
    return out;
}

std::vector<std::string> split_list(const std::string& csv) {
    std::vector<std::string> out;
    std::stringstream ss(csv);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

}  // namespace cl::cli

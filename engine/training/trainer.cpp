#include "engine/training/trainer.h"

#include "engine/training/per_position_loss.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/base/errors.h"
#include "engine/model/arch_conversion.h"
#include "engine/model/architecture.h"
#include "engine/model/model.h"
#include "engine/model/model_writer.h"
#include "engine/model/safetensors.h"
#include "engine/model/transformer.h"
#include "engine/model/weights_io.h"
#include "engine/tokenizer/tokenizer.h"

namespace cl {
namespace {

using json = nlohmann::json;

struct Batch {
    torch::Tensor ids;  // (B, L) int64 clean tokens
    torch::Tensor
        response;  // (B, L) bool: positions that may be masked (everything after the prompt)
    int64_t tokens = 0;
};

class BatchMaker {
public:
    BatchMaker(const TrainOptions& o, const Tokenizer& tok, const ModelConfig& c,
               std::vector<std::string> verses)
        : m_o(o), m_tok(tok), m_cfg(c), m_verses(std::move(verses)) {
        for (const auto& [f, w] : o.mixture)
            if (w > 0) {
                m_families.push_back(f);
                m_weights.push_back(w);
            }
        if (m_families.empty())
            throw InputError(Setting{"mixture"}, "no family has a positive weight");
    }
    // The prompt in the chat format of the architecture being trained.
    std::string chat_template(const std::string& prompt) const {
        return detail::find_architecture(m_cfg.architecture)->chat_template(m_tok, prompt);
    }

    // Batch `index` of the given split: a pure function of (seed, split, index).
    Batch make(int64_t index, tasks::Split split) const {
        std::mt19937_64 rng(m_o.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(index) * 2 +
                            (split == tasks::Split::Eval ? 1 : 0));
        std::discrete_distribution<size_t> pick(m_weights.begin(), m_weights.end());
        const std::string& family = m_families[pick(rng)];
        tasks::TaskGenerator gen(rng(), split, m_o.difficulty, m_verses);
        std::vector<std::vector<int64_t>> seqs;
        std::vector<int64_t> prompt_lens;
        size_t max_resp = static_cast<size_t>(response_pad(rng)), max_len = 0;
        std::vector<std::vector<int32_t>> prompts, responses;
        for (int b = 0; b < m_o.batch_size; ++b) {
            auto item = gen.next(family);
            prompts.push_back(m_tok.encode(chat_template(item.prompt)));
            auto r = m_tok.encode(item.response);
            if (r.size() > 120) r.resize(120);  // long prose continuations are cut
            r.push_back(static_cast<int32_t>(m_cfg.eos_token_id));
            responses.push_back(r);
            max_resp = std::max(max_resp, r.size());
        }
        for (int b = 0; b < m_o.batch_size; ++b)
            max_len = std::max(max_len, prompts[b].size() + max_resp);
        auto ids = torch::full({m_o.batch_size, static_cast<int64_t>(max_len)}, m_cfg.eos_token_id,
                               torch::kLong);
        auto resp = torch::zeros({m_o.batch_size, static_cast<int64_t>(max_len)}, torch::kBool);
        auto ia = ids.accessor<int64_t, 2>();
        auto ra = resp.accessor<bool, 2>();
        for (int b = 0; b < m_o.batch_size; ++b) {
            size_t i = 0;
            for (int32_t t : prompts[b]) ia[b][static_cast<int64_t>(i++)] = t;
            for (int32_t t : responses[b]) ia[b][static_cast<int64_t>(i++)] = t;
            for (size_t k = prompts[b].size(); k < max_len; ++k)
                ra[b][static_cast<int64_t>(k)] = true;
        }
        return {ids, resp, static_cast<int64_t>(m_o.batch_size * max_len)};
    }

private:
    int response_pad(std::mt19937_64& rng) const {
        if (m_o.response_pad_max <= m_o.response_pad) return m_o.response_pad;
        return std::uniform_int_distribution<int>(m_o.response_pad, m_o.response_pad_max)(rng);
    }

    const TrainOptions& m_o;
    const Tokenizer& m_tok;
    const ModelConfig& m_cfg;
    std::vector<std::string> m_verses;
    std::vector<std::string> m_families;
    std::vector<double> m_weights;
};

// Masked-diffusion loss of one batch with its own noise generator (LLaDA): t ~ U(eps, 1), each
// response token masked with probability t, cross-entropy on the masked tokens weighted 1/t.
torch::Tensor masked_loss(detail::Transformer& net, const Batch& batch, const ModelConfig& c,
                          double eps, at::Generator& gen) {
    const int64_t B = batch.ids.size(0), L = batch.ids.size(1);
    auto t = torch::rand({B, 1}, gen) * (1 - eps) + eps;            // (B, 1)
    auto masked = (torch::rand({B, L}, gen) < t) & batch.response;  // (B, L)
    auto noised = torch::where(masked, torch::full_like(batch.ids, c.mask_token_id), batch.ids);
    auto logits = net.forward_full(noised);                                  // (B, L, V)
    auto ce = detail::per_position_ce(logits, batch.ids, c.logits_shift);    // (B, L)
    auto weighted = (ce * masked.to(torch::kFloat32)) / t;                   // (B, L)
    auto resp_len = batch.response.sum(1).clamp_min(1).to(torch::kFloat32);  // (B)
    return (weighted.sum(1) / resp_len).mean();
}

// Uniform-noise tokens (B, L) from the one definition of the uniform prior's support.
torch::Tensor uniform_noise_like(const torch::Tensor& ids, const ModelConfig& c,
                                 at::Generator& gen) {
    auto draws = torch::randint(0, int64_t{1} << 62, ids.sizes(), gen, torch::kLong);  // (B, L)
    auto flat = draws.view({-1});
    auto* d = flat.data_ptr<int64_t>();
    for (int64_t i = 0; i < flat.numel(); ++i)
        d[i] = uniform_noise_token(static_cast<uint64_t>(d[i]), c.vocab_size, c.mask_token_id);
    return draws;
}

// Uniform-noise loss (GIDD's forward process with a uniform prior and the linear schedule
// alpha_t = 1 - t): each response token is replaced by a uniformly random token with
// probability t, t ~ U(eps, 1) per sequence. The model predicts the clean token at every
// response position, corrupted or not (under uniform noise nothing marks which ones are noise),
// by cross-entropy averaged over the response. This is the x0-prediction surrogate of GIDD's
// ELBO: the ELBO's own weights vanish as t -> 1, where generation's first steps sample.
torch::Tensor uniform_loss(detail::Transformer& net, const Batch& batch, const ModelConfig& c,
                           double eps, at::Generator& gen) {
    const int64_t B = batch.ids.size(0), L = batch.ids.size(1);
    auto t = torch::rand({B, 1}, gen) * (1 - eps) + eps;             // (B, 1)
    auto corrupt = (torch::rand({B, L}, gen) < t) & batch.response;  // (B, L)
    auto noised = torch::where(corrupt, uniform_noise_like(batch.ids, c, gen), batch.ids);
    auto logits = net.forward_full(noised);                                  // (B, L, V)
    auto ce = detail::per_position_ce(logits, batch.ids, c.logits_shift);    // (B, L)
    auto resp = batch.response.to(torch::kFloat32);                          // (B, L)
    auto resp_len = batch.response.sum(1).clamp_min(1).to(torch::kFloat32);  // (B)
    return ((ce * resp).sum(1) / resp_len).mean();
}

torch::Tensor diffusion_loss(detail::Transformer& net, const Batch& batch, const ModelConfig& c,
                             double eps, at::Generator& gen) {
    return c.noise_process == NoiseProcess::Uniform ? uniform_loss(net, batch, c, eps, gen)
                                                    : masked_loss(net, batch, c, eps, gen);
}

double lr_at(const TrainOptions& o, int64_t step) {
    if (step < o.warmup_steps)
        return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
    const double progress = std::min(
        1.0, static_cast<double>(step - o.warmup_steps) /
                 std::max<double>(1.0, static_cast<double>(o.total_steps - o.warmup_steps)));
    return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1 + std::cos(M_PI * progress));
}

void write_generation_defaults(const std::filesystem::path& dir) {
    json g = {{"bos_token_id", nullptr},
              {"gen_length", 64},
              {"block_length", 32},
              {"steps", 64},
              {"chat_template", true}};
    std::ofstream(dir / "generation_config.json") << g.dump(2);
}

// Rejects options the trainer cannot use, naming the flag.
void check_options(const TrainOptions& o) {
    if (o.out_dir.empty()) throw InputError(Setting{"out"}, "an output folder is required");
    if (o.batch_size < 1 || o.batch_size > 4096)
        throw InputError(Setting{"batch_size"}, "must be between 1 and 4096");
    if (o.total_steps < 1) throw InputError(Setting{"steps"}, "must be positive");
    if (!(o.lr > 0)) throw InputError(Setting{"lr"}, "must be positive");
    const auto& d = o.difficulty;
    if (d.arith_max_digits < 1 || d.arith_max_digits > 9)
        throw InputError(Setting{"arith_digits"}, "must be between 1 and 9");
    if (d.kv_min_pairs < 1 || d.kv_max_pairs < d.kv_min_pairs)
        throw InputError(Setting{"kv_min_pairs"}, "need 1 <= kv_min_pairs <= kv_max_pairs");
    if (o.response_pad < 1 || o.response_pad > 4096)
        throw InputError(Setting{"response_pad"}, "must be between 1 and 4096");
    if (o.response_pad_max != 0 &&
        (o.response_pad_max < o.response_pad || o.response_pad_max > 4096))
        throw InputError(
            Setting{"response_pad_max"},
            "must be 0 or between response_pad (" + std::to_string(o.response_pad) + ") and 4096");
}

// The architecture of a new model (LLaDA unless the options name another).
std::string new_model_architecture(const TrainOptions& o) {
    return o.architecture.empty() ? std::string("llada") : o.architecture;
}

// The tokenizer of the model being trained: copied from a warm start, kept when resuming, or
// trained once on a sample of every family (special tokens named as the architecture names them)
// and then fixed for the model's life.
void prepare_tokenizer(const TrainOptions& o, const std::filesystem::path& tok_file, bool resuming,
                       bool warm_start, const std::vector<std::string>& verses) {
    if (warm_start) {
        if (!std::filesystem::exists(o.init_from / "tokenizer.json"))
            throw InputError(o.init_from, "init_from is not a model folder (no tokenizer.json)");
        std::filesystem::copy_file(o.init_from / "tokenizer.json", tok_file,
                                   std::filesystem::copy_options::overwrite_existing);
    } else if (!resuming) {
        std::vector<std::string> texts;
        tasks::TaskGenerator g(o.seed + 17, tasks::Split::Train, o.difficulty, verses);
        for (const auto& f : tasks::all_families()) {
            if (f == "prose" && verses.empty()) continue;
            for (int i = 0; i < 1500; ++i) {
                auto item = g.next(f);
                texts.push_back(item.prompt);
                texts.push_back(item.response);
            }
        }
        texts.emplace_back("user assistant");
        std::ofstream(tok_file) << rename_special_tokens(
            train_byte_level_bpe(texts, o.vocab_size, true), "llada", new_model_architecture(o),
            tok_file);
    }
}

// Weights to start from: the checkpoint or the warm-start model (copied), or fresh ones.
detail::TransformerWeights initial_weights(const TrainOptions& o, const ModelConfig& c,
                                           const std::filesystem::path& ckpt, bool resuming,
                                           bool warm_start) {
    detail::TransformerWeights w;
    if (resuming || warm_start) {
        auto m = Model::load(resuming ? ckpt : o.init_from);
        w = m->net().weights();
        w.drop_panels();
        // Training runs on row-major tensors, as a fresh start does (inference stores them
        // column-major).
        w.for_each([](torch::Tensor& t) { t = t.clone(torch::MemoryFormat::Contiguous); });
    } else {
        w = detail::init_weights(c);
    }
    return w;
}

// AdamW with weight decay on the matrices only (not on the norm gains).
torch::optim::AdamW make_optimizer(const TrainOptions& o,
                                   const std::vector<torch::Tensor>& params) {
    std::vector<torch::Tensor> decay, no_decay;
    for (auto& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(
        decay,
        std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(o.weight_decay)));
    groups.emplace_back(no_decay,
                        std::make_unique<torch::optim::AdamWOptions>(
                            torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(0.0)));
    return torch::optim::AdamW(groups);
}

// Writes the resumable checkpoint (weights, optimizer, counters) atomically, then refreshes the
// output folder as a loadable model (f16 weights keep it small).
void save_checkpoint(const TrainOptions& o, const ModelConfig& c,
                     const std::filesystem::path& tok_file, detail::Transformer& net,
                     torch::optim::AdamW& opt, int64_t step, int64_t tokens_seen, double val_loss) {
    const auto ckpt = o.out_dir / "checkpoint";
    const auto tmp = o.out_dir / "checkpoint.tmp";
    std::filesystem::remove_all(tmp);
    std::filesystem::create_directories(tmp);
    std::ofstream(tmp / "config.json") << c.to_json();
    std::filesystem::copy_file(tok_file, tmp / "tokenizer.json");
    write_generation_defaults(tmp);
    detail::save_weights(tmp, c, net.weights(), StorageDType::F32);
    torch::save(opt, (tmp / "optimizer.pt").string());
    std::ofstream(tmp / "state.json") << json{
        {"step", step},
        {"tokens_seen", tokens_seen},
        {"val_loss", val_loss},
        {"seed", o.seed},
        {"total_steps", o.total_steps}}.dump(2);
    std::filesystem::remove_all(ckpt);
    std::filesystem::rename(tmp, ckpt);
    // The output folder itself is always a loadable model (f16 weights keep it small).
    std::ofstream(o.out_dir / "config.json") << c.to_json();
    write_generation_defaults(o.out_dir);
    detail::save_weights(o.out_dir, c, net.weights(), StorageDType::F16);
}

// The shape being trained: the checkpoint's or warm start's config, or the options' shape with
// the special tokens of the fresh tokenizer.
ModelConfig model_config_for(const TrainOptions& o, const Tokenizer& tok,
                             const std::filesystem::path& ckpt, bool resuming, bool warm_start) {
    if (resuming) return load_model_config(ckpt);  // the checkpoint's noise process
    if (warm_start) {
        ModelConfig c = load_model_config(o.init_from);
        c.noise_process = o.noise;  // a masked model may start a uniform-noise one
        return c;
    }
    ModelConfig c = o.shape;
    if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;
    c.noise_process = o.noise;
    set_architecture(c, new_model_architecture(o));
    const auto& names = detail::find_architecture(c.architecture)->special_tokens;
    c.vocab_size = tok.vocab_size();
    c.mask_token_id = tok.required_token_id(names.mask);
    c.eos_token_id = tok.required_token_id(names.eos);
    c.pad_token_id = c.eos_token_id;
    c.bos_token_id = tok.required_token_id(names.bos);
    c.validate(o.out_dir / "config.json");
    return c;
}

// A warm start of another architecture (or fewer key/value heads) than the options ask for is
// converted once into OUT/converted-start, which the run then starts from.
TrainOptions with_converted_start(const TrainOptions& options) {
    if (options.resume || options.init_from.empty()) return options;
    const ModelConfig src = load_model_config(options.init_from);
    const std::string arch = options.architecture.empty() ? src.architecture : options.architecture;
    const int64_t kv = options.shape.n_kv_heads;
    if (arch == src.architecture && (kv == 0 || kv == src.n_kv_heads)) return options;
    TrainOptions o = options;
    o.init_from = options.out_dir / "converted-start";
    convert_model_folder(options.init_from, o.init_from, arch, kv);
    return o;
}

}  // namespace

TrainResult train_model(const TrainOptions& options) {
    check_options(options);
    std::filesystem::create_directories(options.out_dir);
    const TrainOptions o = with_converted_start(options);
    const auto ckpt = o.out_dir / "checkpoint";
    const bool resuming = o.resume && std::filesystem::exists(ckpt / "state.json");
    if (o.resume && !resuming) throw InputError(ckpt, "resume: no checkpoint to resume from");

    std::vector<std::string> verses;
    if (o.mixture.count("prose") && o.mixture.at("prose") > 0) verses = tasks::load_kjv_verses();

    const auto tok_file = o.out_dir / "tokenizer.json";
    const bool warm_start = !resuming && !o.init_from.empty();
    prepare_tokenizer(o, tok_file, resuming, warm_start, verses);
    auto tok = Tokenizer::load(tok_file);

    const ModelConfig c = model_config_for(o, *tok, ckpt, resuming, warm_start);
    json state = json::object();
    if (resuming) {
        std::ifstream in(ckpt / "state.json");
        state = json::parse(in);
    }

    torch::manual_seed(o.seed);
    detail::TransformerWeights w = initial_weights(o, c, ckpt, resuming, warm_start);
    w.for_each([](torch::Tensor& t) { t.set_requires_grad(true); });
    detail::Transformer net(c, w, torch::Device(torch::kCPU));
    std::vector<torch::Tensor> params = net.parameters();
    torch::optim::AdamW opt = make_optimizer(o, params);
    int64_t step = 0, tokens_seen = 0;
    double val_loss = -1;
    if (resuming) {
        torch::load(opt, (ckpt / "optimizer.pt").string());
        step = state.value("step", int64_t{0});
        tokens_seen = state.value("tokens_seen", int64_t{0});
        val_loss = state.value("val_loss", -1.0);
    }

    BatchMaker maker(o, *tok, c, verses);
    std::vector<Batch> val_batches;
    val_batches.reserve(8);
    for (int i = 0; i < 8; ++i) val_batches.push_back(maker.make(i, tasks::Split::Eval));
    auto validate = [&] {
        torch::NoGradGuard ng;
        auto gen = at::detail::createCPUGenerator(12345);
        double sum = 0;
        for (const auto& b : val_batches)
            sum += diffusion_loss(net, b, c, o.eps, gen).item<double>();
        return sum / static_cast<double>(val_batches.size());
    };
    std::ofstream log(o.out_dir / "train_log.jsonl", std::ios::app);

    auto save = [&] { save_checkpoint(o, c, tok_file, net, opt, step, tokens_seen, val_loss); };

    const int64_t first_step = step;
    const auto t_start = std::chrono::steady_clock::now();
    auto elapsed_s = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    };
    int64_t session_tokens = 0;
    double window_loss = 0;
    int window_n = 0;
    TrainResult result;
    auto noise = at::detail::createCPUGenerator(o.seed ^ 0x5eedull);
    while (step < o.total_steps) {
        // Noise for batch `step` is re-seeded from the step, so a resumed run continues
        // identically.
        noise.set_current_seed(o.seed * 7919 + static_cast<uint64_t>(step));
        Batch batch = maker.make(step, tasks::Split::Train);
        const double lr = lr_at(o, step);
        for (auto& g : opt.param_groups())
            static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
        opt.zero_grad();
        auto loss = diffusion_loss(net, batch, c, o.eps, noise);
        loss.backward();
        torch::nn::utils::clip_grad_norm_(params, o.clip);
        opt.step();
        ++step;
        tokens_seen += batch.tokens;
        session_tokens += batch.tokens;
        window_loss += loss.item<double>();
        ++window_n;
        const bool stop_for_time = o.max_minutes > 0 && elapsed_s() > o.max_minutes * 60.0;
        if (step % o.eval_every == 0 || step == o.total_steps || stop_for_time)
            val_loss = validate();
        if (step % o.log_every == 0 || step == o.total_steps || stop_for_time) {
            TrainProgress p;
            p.step = step;
            p.total_steps = o.total_steps;
            p.loss = window_loss / window_n;
            p.val_loss = val_loss;
            p.tokens_per_s = session_tokens / std::max(1e-9, elapsed_s());
            const double per_step = elapsed_s() / static_cast<double>(step - first_step);
            p.eta_s = per_step * static_cast<double>(o.total_steps - step);
            p.lr = lr;
            p.tokens_seen = tokens_seen;
            log << json{{"step", step},
                        {"loss", p.loss},
                        {"val_loss", val_loss},
                        {"lr", lr},
                        {"tokens_seen", tokens_seen},
                        {"tokens_per_s", p.tokens_per_s}}
                       .dump()
                << '\n';
            log.flush();
            if (o.on_progress) o.on_progress(p);
            result.final_loss = p.loss;
            window_loss = 0;
            window_n = 0;
        }
        if (step % o.checkpoint_every == 0 || step == o.total_steps || stop_for_time) save();
        if (stop_for_time) break;
    }
    result.steps_done = step;
    result.final_val_loss = val_loss;
    result.seconds = elapsed_s();
    result.tokens_seen = tokens_seen;
    result.finished = step >= o.total_steps;
    return result;
}

}  // namespace cl

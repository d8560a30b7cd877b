#include "engine/model/arch_conversion.h"

#include <torch/torch.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/base/errors.h"
#include "engine/model/architecture.h"
#include "engine/model/config_json.h"
#include "engine/model/model.h"
#include "engine/model/model_writer.h"
#include "engine/model/transformer.h"
#include "engine/model/weights_io.h"

namespace cl {
namespace {

const detail::Architecture& architecture_named(const std::string& name) {
    if (const auto* arch = detail::find_architecture(name)) return *arch;
    ModelConfig probe;
    set_architecture(probe, name);  // throws, naming the known architectures
    throw std::logic_error("set_architecture accepted an unknown architecture");
}

std::vector<std::pair<std::string, std::string>> renames(const detail::SpecialTokenNames& from,
                                                         const detail::SpecialTokenNames& to) {
    std::vector<std::pair<std::string, std::string>> r;
    auto add = [&](const std::string& a, const std::string& b) {
        if (!a.empty() && !b.empty() && a != b) r.emplace_back(a, b);
    };
    add(from.bos, to.bos);
    add(from.eos, to.eos);
    add(from.mask, to.mask);
    add(from.turn_start, to.turn_start);
    add(from.turn_end, to.turn_end);
    return r;
}

// (n_kv * group * Dh, D) -> (n_kv * Dh, D): query head h used source key/value head
// h / (n_heads / src_kv); after pooling it uses h / (n_heads / n_kv), the mean of `group`
// consecutive source heads.
torch::Tensor mean_pool_heads(const torch::Tensor& proj, int64_t src_kv, int64_t n_kv,
                              int64_t head_dim) {
    const int64_t D = proj.size(1), group = src_kv / n_kv;
    return proj.reshape({n_kv, group, head_dim, D}).mean(1).reshape({n_kv * head_dim, D});
}

void convert_layer_heads(detail::TransformerWeights& w, const ModelConfig& src,
                         const ModelConfig& dst) {
    const int64_t Dh = src.head_dim();
    for (auto& l : w.layers) {
        if (dst.n_kv_heads != src.n_kv_heads) {
            l.k_proj = mean_pool_heads(l.k_proj, src.n_kv_heads, dst.n_kv_heads, Dh);
            l.v_proj = mean_pool_heads(l.v_proj, src.n_kv_heads, dst.n_kv_heads, Dh);
            if (l.k_bias.defined()) {
                l.k_bias = l.k_bias.reshape({dst.n_kv_heads, -1, Dh}).mean(1).reshape({-1});
                l.v_bias = l.v_bias.reshape({dst.n_kv_heads, -1, Dh}).mean(1).reshape({-1});
            }
        }
        if (dst.qkv_bias && !l.q_bias.defined()) {
            l.q_bias = torch::zeros({dst.n_heads * Dh});
            l.k_bias = torch::zeros({dst.n_kv_heads * Dh});
            l.v_bias = torch::zeros({dst.n_kv_heads * Dh});
        }
    }
}

ModelConfig target_config(const ModelConfig& src, const std::filesystem::path& from,
                          const std::string& arch, int64_t n_kv_heads) {
    ModelConfig dst = src;
    dst.n_kv_heads = n_kv_heads > 0 ? n_kv_heads : src.n_kv_heads;
    if (src.n_kv_heads % dst.n_kv_heads != 0)
        throw InputError(Setting{"kv_heads"},
                         std::to_string(dst.n_kv_heads) + " key/value heads do not divide the " +
                             std::to_string(src.n_kv_heads) + " of " + from.string());
    set_architecture(dst, arch);
    if (src.qkv_bias && !dst.qkv_bias)
        throw InputError(from, "its q/k/v biases have no place in a " + arch + " model");
    dst.validate(from / "config.json");
    return dst;
}

}  // namespace

std::string rename_special_tokens(const std::string& tokenizer_json, const std::string& from_arch,
                                  const std::string& to_arch, const std::filesystem::path& file) {
    auto j = nlohmann::json::parse(tokenizer_json);
    const auto pairs = renames(architecture_named(from_arch).special_tokens,
                               architecture_named(to_arch).special_tokens);
    auto& added = j["added_tokens"];
    for (const auto& [old_name, new_name] : pairs) {
        for (const auto& t : added)
            if (t.value("content", "") == new_name)
                throw InputError(file, "'" + new_name + "' is already a token; cannot rename '" +
                                           old_name + "' to it");
        for (auto& t : added)
            if (t.value("content", "") == old_name) t["content"] = new_name;
        auto& vocab = j["model"]["vocab"];
        if (vocab.is_object() && vocab.contains(old_name)) {
            vocab[new_name] = vocab[old_name];
            vocab.erase(old_name);
        }
    }
    return j.dump(2);
}

ModelConfig convert_model_folder(const std::filesystem::path& from, const std::filesystem::path& to,
                                 const std::string& arch, int64_t n_kv_heads) {
    const ModelConfig src = load_model_config(from);
    const ModelConfig dst = target_config(src, from, arch, n_kv_heads);
    std::ifstream tok_in(from / "tokenizer.json");
    if (!tok_in) throw InputError(from / "tokenizer.json", "cannot be read");
    const std::string tok_text((std::istreambuf_iterator<char>(tok_in)), {});

    auto model = Model::load(from);
    detail::TransformerWeights w = model->net().weights();
    w.drop_panels();
    w.for_each([](torch::Tensor& t) { t = t.to(torch::kFloat32).clone(); });
    convert_layer_heads(w, src, dst);

    std::filesystem::create_directories(to);
    std::ofstream(to / "tokenizer.json")
        << rename_special_tokens(tok_text, src.architecture, arch, from / "tokenizer.json");
    std::ofstream(to / "config.json") << dst.to_json();
    if (std::filesystem::exists(from / "generation_config.json"))
        std::filesystem::copy_file(from / "generation_config.json", to / "generation_config.json",
                                   std::filesystem::copy_options::overwrite_existing);
    detail::save_weights(to, dst, w, StorageDType::F32);
    return dst;
}

}  // namespace cl

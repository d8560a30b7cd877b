#include "engine/model/weights_io.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/architecture.h"
#include "engine/model/safetensors.h"

namespace cl::detail {

TransformerWeights init_weights(const ModelConfig& c) {
    const int64_t D = c.d_model, Dh = c.head_dim(), F = c.mlp_hidden_size, V = c.vocab_size;
    auto normal = [](const std::vector<int64_t>& shape) { return torch::randn(shape) * 0.02; };
    TransformerWeights w;
    w.wte = normal({V, D});
    w.ln_f = torch::ones({D});
    w.head = normal({V, D});
    for (int64_t i = 0; i < c.n_layers; ++i) {
        LayerWeights l;
        l.attn_norm = torch::ones({D});
        l.ff_norm = torch::ones({D});
        l.q_proj = normal({c.n_heads * Dh, D});
        l.k_proj = normal({c.n_kv_heads * Dh, D});
        l.v_proj = normal({c.n_kv_heads * Dh, D});
        l.attn_out = normal({D, c.n_heads * Dh}) / std::sqrt(2.0 * c.n_layers);
        l.ff_proj = normal({F, D});
        l.up_proj = normal({F, D});
        l.ff_out = normal({D, F}) / std::sqrt(2.0 * c.n_layers);
        w.layers.push_back(l);
    }
    if (c.qkv_bias)
        for (auto& l : w.layers) {
            l.q_bias = normal({c.n_heads * Dh});
            l.k_bias = normal({c.n_kv_heads * Dh});
            l.v_bias = normal({c.n_kv_heads * Dh});
        }
    if (c.weight_tying) w.head = w.wte;
    return w;
}

void save_weights(const std::filesystem::path& dir, const ModelConfig& config,
                  TransformerWeights& weights, StorageDType dtype, int shards) {
    const auto* arch = find_architecture(config.architecture);
    if (!arch) throw std::logic_error("save_weights: unknown architecture " + config.architecture);
    std::vector<std::pair<std::string, torch::Tensor>> items;
    for (const auto& slot : arch->weight_slots(config, weights)) {
        const auto& name = slot.name;
        torch::Tensor cpu = slot.tensor->detach().to(torch::kCPU).contiguous();
        switch (dtype) {
            case StorageDType::F32:
                cpu = cpu.to(torch::kFloat32);
                break;
            case StorageDType::F16:
                cpu = cpu.to(torch::kFloat16);
                break;
            case StorageDType::BF16:
                cpu = cpu.to(torch::kBFloat16);
                break;
        }
        items.emplace_back(name, cpu.contiguous());
    }
    const DType dt = dtype == StorageDType::F32   ? DType::F32
                     : dtype == StorageDType::F16 ? DType::F16
                                                  : DType::BF16;
    shards = std::max(1, std::min<int>(shards, static_cast<int>(items.size())));
    auto to_write = [&](size_t begin, size_t end) {
        std::vector<TensorToWrite> out;
        for (size_t i = begin; i < end; ++i) {
            const auto& [name, t] = items[i];
            out.push_back({name, dt, t.sizes().vec(), t.data_ptr(),
                           static_cast<size_t>(t.numel() * t.element_size())});
        }
        return out;
    };
    const std::map<std::string, std::string> meta{{"format", "pt"}};
    if (shards == 1) {
        write_safetensors(dir / "model.safetensors", to_write(0, items.size()), meta);
        return;
    }
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", 0}};
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    size_t total = 0;
    const size_t per =
        (items.size() + static_cast<size_t>(shards) - 1) / static_cast<size_t>(shards);
    for (int s = 0; s < shards; ++s) {
        const size_t b = static_cast<size_t>(s) * per, e = std::min(items.size(), b + per);
        if (b >= e) break;
        char name[64];
        std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
        write_safetensors(dir / name, to_write(b, e), meta);
        for (size_t i = b; i < e; ++i) {
            map[items[i].first] = name;
            total += static_cast<size_t>(items[i].second.numel() * items[i].second.element_size());
        }
    }
    index["metadata"]["total_size"] = total;
    index["weight_map"] = map;
    std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

}  // namespace cl::detail

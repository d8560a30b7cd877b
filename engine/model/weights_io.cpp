#include "engine/model/weights_io.h"

#include <cmath>
#include <cstring>
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

namespace {

size_t element_bytes(const std::string& dtype) {
    if (dtype == "F32") return 4;
    if (dtype == "F16" || dtype == "BF16") return 2;
    if (dtype == "I8") return 1;  // not loadable: for folders that must be refused
    throw std::invalid_argument("write_sparse_weights: unknown dtype " + dtype);
}

size_t slot_bytes(const WeightSlot& slot, const std::string& dtype) {
    size_t bytes = element_bytes(dtype);
    for (int64_t d : slot.shape) bytes *= static_cast<size_t>(d);
    return bytes;
}

// Streams one slot's random bf16 values (see write_sparse_weights) into `out`.
void write_random_bf16(std::ofstream& out, const WeightSlot& slot, uint64_t seed) {
    const bool vector = slot.shape.size() < 2;
    const double fan_in = vector ? 1.0 : static_cast<double>(slot.shape.back());
    const auto bound = static_cast<float>(std::sqrt(3.0 / fan_in));
    size_t n = 1;
    for (int64_t d : slot.shape) n *= static_cast<size_t>(d);
    std::vector<uint16_t> buf(std::min<size_t>(n, size_t{1} << 20));
    uint64_t state = seed ^ (std::hash<std::string>{}(slot.name) * 0x9e3779b97f4a7c15ull);
    for (size_t done = 0; done < n;) {
        const size_t m = std::min(buf.size(), n - done);
        for (size_t i = 0; i < m; ++i) {
            float v = 1.f;  // norm weights
            if (!vector) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG step
                const auto u = static_cast<float>(state >> 40) * 0x1.0p-24f;      // [0, 1)
                v = (2.f * u - 1.f) * bound;
            }
            uint32_t bits = 0;
            std::memcpy(&bits, &v, 4);
            buf[i] = static_cast<uint16_t>(bits >> 16);  // bf16: the float's upper half
        }
        out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(m * 2));
        done += m;
    }
}

// One shard: the safetensors header for slots [begin, end), then a hole as long as their data
// (or, random, the data).
void write_sparse_shard(const std::filesystem::path& file, const std::vector<WeightSlot>& slots,
                        size_t begin, size_t end, const std::string& dtype, bool random,
                        uint64_t seed) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    size_t offset = 0;
    for (size_t i = begin; i < end; ++i) {
        const size_t bytes = slot_bytes(slots[i], dtype);
        header[slots[i].name] = {{"dtype", dtype},
                                 {"shape", slots[i].shape},
                                 {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.resize((text.size() + 7) / 8 * 8, ' ');  // data starts 8-byte aligned
    const uint64_t n = text.size();
    {
        std::ofstream out(file, std::ios::binary);
        char len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
        out.write(len, 8);
        out << text;
        for (size_t i = begin; random && i < end; ++i) write_random_bf16(out, slots[i], seed);
        if (!out) throw std::runtime_error("could not write " + file.string() + " (disk full?)");
    }
    std::filesystem::resize_file(file, 8 + n + offset);
}

}  // namespace

void write_sparse_weights(const std::filesystem::path& dir, const ModelConfig& config,
                          const std::string& dtype, int shards, bool random, uint64_t seed) {
    if (random && dtype != "BF16")
        throw std::invalid_argument("write_sparse_weights: random weights are written as BF16");
    const auto* arch = find_architecture(config.architecture);
    if (!arch) throw std::logic_error("write_sparse_weights: unknown architecture");
    TransformerWeights unbound;
    unbound.layers.resize(static_cast<size_t>(config.n_layers));
    const auto slots = arch->weight_slots(config, unbound);
    shards = std::max(1, std::min<int>(shards, static_cast<int>(slots.size())));
    const size_t per =
        (slots.size() + static_cast<size_t>(shards) - 1) / static_cast<size_t>(shards);
    nlohmann::ordered_json map = nlohmann::ordered_json::object();
    size_t total = 0;
    for (int s = 0; s < shards; ++s) {
        const size_t b = static_cast<size_t>(s) * per, e = std::min(slots.size(), b + per);
        char name[64];
        std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
        write_sparse_shard(dir / name, slots, b, e, dtype, random, seed);
        for (size_t i = b; i < e; ++i) {
            map[slots[i].name] = name;
            total += slot_bytes(slots[i], dtype);
        }
    }
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = map;
    std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

}  // namespace cl::detail

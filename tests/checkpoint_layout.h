// A model folder with a real checkpoint's layout at full size (config.json as published, the
// architecture's tensor names and shapes in bf16, sharded with an index) whose weights are holes
// in sparse files: a 16 GB checkpoint costs kilobytes of disk, so the checks that must not read
// the weights (inspect-model, check_model_folder) can be run on it.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/model/architecture.h"
#include "engine/model/model_config.h"

namespace cl::test {

inline void write_sparse_checkpoint(const std::filesystem::path& dir,
                                    const std::string& config_json, int shards,
                                    const std::string& dtype = "BF16") {
    const size_t element = dtype == "F32" ? 4 : dtype == "I8" ? 1 : 2;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.json") << config_json;
    const ModelConfig c = load_model_config(dir);
    detail::TransformerWeights unused;
    unused.layers.resize(static_cast<size_t>(c.n_layers));
    const auto slots = detail::find_architecture(c.architecture)->weight_slots(c, unused);
    nlohmann::json weight_map = nlohmann::json::object();
    const size_t per_shard = (slots.size() + shards - 1) / static_cast<size_t>(shards);
    for (int s = 0; s < shards; ++s) {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
        nlohmann::json header = nlohmann::json::object();
        size_t offset = 0;
        for (size_t i = s * per_shard; i < std::min(slots.size(), (s + 1) * per_shard); ++i) {
            size_t bytes = element;
            for (int64_t d : slots[i].shape) bytes *= static_cast<size_t>(d);
            header[slots[i].name] = {{"dtype", dtype},
                                     {"shape", slots[i].shape},
                                     {"data_offsets", {offset, offset + bytes}}};
            weight_map[slots[i].name] = name;
            offset += bytes;
        }
        std::string text = header.dump();
        text.resize((text.size() + 7) / 8 * 8, ' ');
        const uint64_t n = text.size();
        {
            std::ofstream out(dir / name, std::ios::binary);
            char len[8];
            std::memcpy(len, &n, 8);  // little-endian hosts only, as the tests run
            out.write(len, 8);
            out << text;
        }
        std::filesystem::resize_file(dir / name, 8 + n + offset);  // the weights: a hole
    }
    std::ofstream(dir / "model.safetensors.index.json")
        << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2);
}

}  // namespace cl::test

#include "engine/model/model_folder.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/base/errors.h"
#include "engine/model/architecture.h"
#include "engine/model/config_json.h"
#include "engine/model/safetensors.h"
#include "engine/model/weight_files.h"

namespace cl {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
    std::ostringstream s;
    s << "[";
    for (size_t k = 0; k < shape.size(); ++k) s << (k ? ", " : "") << shape[k];
    s << "]";
    return s.str();
}

// The name and shape of every tensor the config implies, from the architecture's weight slots.
std::map<std::string, std::vector<int64_t>> expected_shapes(const ModelConfig& c) {
    const auto* arch = detail::find_architecture(c.architecture);
    detail::TransformerWeights unused;  // the slots point into it; nothing is allocated
    unused.layers.resize(static_cast<size_t>(c.n_layers));
    std::map<std::string, std::vector<int64_t>> out;
    for (const auto& slot : arch->weight_slots(c, unused)) out[slot.name] = slot.shape;
    return out;
}

void check_tensor(const std::filesystem::path& file, const TensorInfo& t,
                  const std::vector<int64_t>& expected) {
    if (t.shape != expected)
        throw InputError(file, "tensor '" + t.name + "' has shape " + shape_text(t.shape) +
                                   " but config.json implies " + shape_text(expected));
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
        throw InputError(file, "tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) +
                                   " (expected F32, F16 or BF16)");
}

// config.json keys that only Python's transformers reads (trust_remote_code).
void note_python_only_keys(const std::filesystem::path& dir, ModelFolder& folder) {
    const auto j = detail::read_json_file(dir / "config.json");
    if (j.is_object() && j.contains("auto_map"))
        folder.notes.emplace_back("config.json: auto_map (Python modeling code) is ignored");
}

uint64_t hash_file(const std::filesystem::path& file, uint64_t h) {
    std::ifstream in(file, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto n = static_cast<size_t>(in.gcount());
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            std::memcpy(&w, buf.data() + i, 8);
            h = (h ^ w) * 0x100000001b3ull;
        }
        for (; i < n; ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001b3ull;
    }
    return h;
}

// Every tensor of the architecture that the index names is in the shard it names (a loader that
// trusts the index, as Python's does, would fail on a folder where it is not).
void check_index_entries(const std::filesystem::path& dir,
                         const std::map<std::string, std::vector<int64_t>>& expected,
                         const std::map<std::string, std::string>& found_in) {
    const auto index = dir / "model.safetensors.index.json";
    for (const auto& [tensor, shard] : read_weight_map(dir)) {
        if (!expected.count(tensor)) continue;  // not the architecture's: ignored like the tensor
        const auto it = found_in.find(tensor);
        if (it == found_in.end())
            throw InputError(
                index, "names tensor '" + tensor + "' in " + shard + ", which does not hold it");
        if (it->second != shard)
            throw InputError(index, "names " + shard + " for tensor '" + tensor +
                                        "', which is in " + it->second);
    }
}

}  // namespace

std::string content_hash(const ModelFolder& folder) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const auto& file : folder.weight_files) h = hash_file(file, h);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return hex;
}

ModelFolder check_model_folder(const std::filesystem::path& dir) {
    if (!std::filesystem::is_directory(dir)) throw InputError(dir, "model folder not found");
    ModelFolder folder;
    folder.dir = dir;
    folder.config = load_model_config(dir);
    note_python_only_keys(dir, folder);
    folder.end_of_turn = detail::find_architecture(folder.config.architecture)->end_of_turn;
    const auto expected = expected_shapes(folder.config);
    std::map<std::string, std::string> seen;  // tensor -> file
    size_t extra = 0;
    folder.weight_files = find_weight_files(dir);
    for (const auto& file : folder.weight_files) {
        const auto st = SafetensorsFile::open(file);
        for (const auto& t : st->tensors()) {
            const auto it = expected.find(t.name);
            if (it == expected.end()) {  // e.g. rotary buffers some exporters store
                ++extra;
                continue;
            }
            check_tensor(file, t, it->second);
            if (!seen.emplace(t.name, file.filename().string()).second)
                throw InputError(file, "tensor '" + t.name + "' appears in two shards");
            folder.tensors.push_back(
                {t.name, t.shape, dtype_name(t.dtype), file.filename().string()});
            folder.stored_bytes += static_cast<int64_t>(t.nbytes);
        }
    }
    check_index_entries(dir, expected, seen);
    for (const auto& [name, shape] : expected)
        if (!seen.count(name))
            throw InputError(dir, "weights lack tensor '" + name + "' that config.json implies");
    if (extra)
        folder.notes.push_back(std::to_string(extra) +
                               " tensors the architecture does not use are ignored");
    return folder;
}

}  // namespace cl

#include "engine/model/weight_files.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <system_error>

#include "engine/base/errors.h"

namespace cl {

std::map<std::string, std::string> read_weight_map(const std::filesystem::path& dir) {
    const auto index = dir / "model.safetensors.index.json";
    if (std::filesystem::exists(dir / "model.safetensors") || !std::filesystem::exists(index))
        return {};
    std::ifstream in(index);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number like 8e3172
        throw InputError(index, std::string("invalid JSON: ") + e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
        throw InputError(index, "no weight_map object");
    std::map<std::string, std::string> map;
    for (const auto& [tensor, entry] : j["weight_map"].items()) {
        if (!entry.is_string()) throw InputError(index, "weight_map entry is not a file name");
        const auto name = entry.get<std::string>();
        if (name.find('/') != std::string::npos || name.find("..") != std::string::npos)
            throw InputError(index, "weight_map names a file outside the folder: " + name);
        map[tensor] = name;
    }
    return map;
}

std::vector<std::filesystem::path> find_weight_files(const std::filesystem::path& dir) {
    const auto single = dir / "model.safetensors";
    if (std::filesystem::exists(single)) return {single};
    if (!std::filesystem::exists(dir / "model.safetensors.index.json"))
        throw InputError(dir, "no model.safetensors or model.safetensors.index.json");
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : read_weight_map(dir)) shards.insert(shard);
    std::vector<std::filesystem::path> files;
    for (const auto& s : shards) {
        // Without throwing: a name from the index may be one the file system cannot even look up
        // (too long), which must be the index's error, not an escaping filesystem_error.
        std::error_code ec;
        if (!std::filesystem::is_regular_file(dir / s, ec)) {
            if (ec && ec != std::errc::no_such_file_or_directory)
                throw InputError(
                    dir / "model.safetensors.index.json",
                    std::string("a shard it lists cannot be looked up: ") + ec.message());
            throw InputError(dir / s, "shard listed in the index is missing");
        }
        files.push_back(dir / s);
    }
    return files;
}

}  // namespace cl

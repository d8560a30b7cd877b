// Reading config.json fields with errors that name the file and the field (architecture files
// and the generation defaults share these).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "engine/base/errors.h"
#include "engine/base/json_int.h"

namespace cl::detail {

// Parses a JSON file; InputError "file: cannot open file" / "file: invalid JSON: ...".
nlohmann::json read_json_file(const std::filesystem::path& file);

// The field's value, `fallback` when absent or null; InputError when it has another type.
template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback, const std::filesystem::path& file) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    try {
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            if (!it->is_number())
                throw InputError(file, std::string("field '") + key + "' has the wrong type");
            return json_int<T>(*it);  // get<T>() casts an out-of-range double: undefined
        } else {
            return it->get<T>();
        }
    } catch (const nlohmann::json::exception&) {
        throw InputError(file, std::string("field '") + key + "' has the wrong type");
    } catch (const std::range_error& e) {
        throw InputError(file, std::string("field '") + key + "': " + e.what());
    }
}

}  // namespace cl::detail

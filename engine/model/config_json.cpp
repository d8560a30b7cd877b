#include "engine/model/config_json.h"

#include <fstream>
#include <sstream>

namespace cl::detail {

nlohmann::json read_json_file(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw InputError(file, "cannot open file");
    std::stringstream buffer;
    buffer << in.rdbuf();
    try {
        return nlohmann::json::parse(buffer.str());
    } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number like 8e3172
        throw InputError(file, std::string("invalid JSON: ") + e.what());
    }
}

}  // namespace cl::detail

#include "engine/model/architecture.h"

#include <algorithm>
#include <list>
#include <mutex>

#include "engine/model/arch_dream.h"
#include "engine/model/arch_llada.h"
#include "engine/model/config_json.h"

namespace cl::detail {
namespace {

struct Table {
    std::mutex mutex;
    // A list: references handed out stay valid when architectures are added later.
    std::list<Architecture> entries{llada_architecture(), dream_architecture()};
};

Table& table() {
    static Table t;
    return t;
}

bool contains(const std::vector<std::string>& list, const std::string& value) {
    return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

void register_architecture(Architecture arch) {
    auto& t = table();
    std::lock_guard lock(t.mutex);
    for (auto& a : t.entries)
        if (a.name == arch.name) {
            a = std::move(arch);
            return;
        }
    t.entries.push_back(std::move(arch));
}

const Architecture* find_architecture(const std::string& name) {
    auto& t = table();
    std::lock_guard lock(t.mutex);
    for (const auto& a : t.entries)
        if (a.name == name) return &a;
    return nullptr;
}

std::vector<std::string> architecture_names() {
    auto& t = table();
    std::lock_guard lock(t.mutex);
    std::vector<std::string> names;
    for (const auto& a : t.entries) names.push_back(a.name);
    return names;
}

const Architecture& find_architecture(const nlohmann::json& config,
                                      const std::filesystem::path& file) {
    // A config without either key is a LLaDA config (the CacheLens format before the table).
    const auto model_type = get_or<std::string>(config, "model_type", "", file);
    std::vector<std::string> classes;
    if (config.contains("architectures") && config["architectures"].is_array())
        for (const auto& c : config["architectures"])
            if (c.is_string()) classes.push_back(c.get<std::string>());
    auto& t = table();
    std::lock_guard lock(t.mutex);
    for (const auto& a : t.entries)
        if (!model_type.empty() && contains(a.model_types, model_type)) return a;
    for (const auto& a : t.entries)
        for (const auto& c : classes)
            if (contains(a.hf_classes, c)) return a;
    if (model_type.empty() && classes.empty()) return t.entries.front();
    std::string known;
    for (const auto& a : t.entries)
        for (const auto& m : a.model_types) known += (known.empty() ? "" : ", ") + m;
    throw InputError(file, "model_type '" + model_type +
                               "' is not a supported architecture (known: " + known + ")");
}

}  // namespace cl::detail

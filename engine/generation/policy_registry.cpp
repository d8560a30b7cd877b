#include <algorithm>
#include <cmath>
#include <mutex>

#include "engine/base/errors.h"
#include "engine/generation/policy.h"

namespace cl {
namespace {

struct Entry {
    PolicyInfo info;
    PolicyFactory factory;
};

std::vector<Entry>& registry() {
    static std::vector<Entry> entries;
    return entries;
}

}  // namespace

bool register_policy(const PolicyInfo& info, PolicyFactory factory) {
    registry().push_back({info, std::move(factory)});
    return true;
}

std::vector<PolicyInfo> list_policies() {
    std::vector<PolicyInfo> out;
    for (const auto& e : registry()) out.push_back(e.info);
    // `none` first, then the catalogue order of POLICIES.md by name.
    std::stable_sort(out.begin(), out.end(), [](const PolicyInfo& a, const PolicyInfo& b) {
        if (a.name == "none" || b.name == "none") return a.name == "none" && b.name != "none";
        return a.name < b.name;
    });
    return out;
}

const PolicyInfo* find_policy(const std::string& name) {
    for (const auto& e : registry())
        if (e.info.name == name) return &e.info;
    return nullptr;
}

std::map<std::string, double> resolve_policy_params(
    const std::string& policy, const std::map<std::string, double>& overrides) {
    const PolicyInfo* info = find_policy(policy);
    if (!info) {
        std::string names;
        for (const auto& p : list_policies()) names += (names.empty() ? "" : ", ") + p.name;
        throw InputError(Setting{"policy"},
                         "unknown policy '" + policy + "' (known: " + names + ")");
    }
    std::map<std::string, double> params;
    for (const auto& s : info->params) params[s.name] = s.default_value;
    for (const auto& [key, value] : overrides) {
        auto spec = std::find_if(info->params.begin(), info->params.end(),
                                 [&](const ParamSpec& s) { return s.name == key; });
        if (spec == info->params.end())
            throw InputError(Setting{"param"},
                             "policy '" + policy + "' has no parameter '" + key + "'");
        if (!std::isfinite(value) || value < spec->min || value > spec->max)
            throw InputError(Setting{"param"}, policy + "." + key + " = " + std::to_string(value) +
                                                   " is outside [" + std::to_string(spec->min) +
                                                   ", " + std::to_string(spec->max) + "]");
        if (spec->integer && value != std::floor(value))
            throw InputError(Setting{"param"}, policy + "." + key + " must be an integer");
        params[key] = value;
    }
    return params;
}

GenerationConfig apply_own_decoding(GenerationConfig config, const std::string& policy) {
    const PolicyInfo* info = find_policy(policy);
    if (!info) return config;
    for (const auto& [key, value] : info->own_decoding) {
        if (key == "threshold")
            config.threshold = value;
        else if (key == "certainty_prior")
            config.certainty_prior = value > 0;
        else if (key == "remasking_random")
            config.remasking = value > 0 ? Remasking::Random : Remasking::LowConfidence;
    }
    return config;
}

std::unique_ptr<CachePolicy> create_policy(const std::string& name,
                                           const std::map<std::string, double>& params) {
    auto resolved = resolve_policy_params(name, params);
    for (const auto& e : registry())
        if (e.info.name == name) {
            auto p = e.factory();
            p->set_params(resolved);
            return p;
        }
    throw InputError(Setting{"policy"}, "unknown policy '" + name + "'");
}

}  // namespace cl

namespace cl {

detail::RowSet CachePolicy::select_rows(int layer, const torch::Tensor&, const torch::Tensor&) {
    throw std::logic_error("policy '" + info().name + "' planned a probe at layer " +
                           std::to_string(layer) + " but does not select rows");
}

}  // namespace cl

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>

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

const char* to_string(ParamType t) {
    switch (t) {
        case ParamType::Integer:
            return "integer";
        case ParamType::Real:
            return "real";
        case ParamType::Switch:
            return "switch";
        case ParamType::Choice:
            return "choice";
    }
    return "?";
}

std::string OwnDecoding::describe() const {
    std::ostringstream out;
    const char* sep = "";
    if (threshold) {
        out << "threshold = " << *threshold;
        sep = ", ";
    }
    if (certainty_prior) {
        out << sep << "certainty_prior = " << (*certainty_prior ? "on" : "off");
        sep = ", ";
    }
    if (remasking) out << sep << "remasking = " << to_string(*remasking);
    return out.str();
}

namespace {

const PolicyInfo& known_policy(const std::string& policy) {
    const PolicyInfo* info = find_policy(policy);
    if (info) return *info;
    std::string names;
    for (const auto& p : list_policies()) names += (names.empty() ? "" : ", ") + p.name;
    throw InputError(Setting{"policy"}, "unknown policy '" + policy + "' (known: " + names + ")");
}

std::string number(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
}

// Throws when `value` does not fit `spec` (range, whole number, choice).
void check_param(const std::string& policy, const ParamSpec& spec, double value) {
    const std::string what = policy + "." + spec.name + " = " + number(value);
    if (!std::isfinite(value) || value < spec.min || value > spec.max)
        throw InputError(Setting{"param"},
                         what + " is outside [" + number(spec.min) + ", " + number(spec.max) + "]");
    if (spec.integral() && value != std::floor(value))
        throw InputError(Setting{"param"},
                         what + ": " + spec.name + " is " + to_string(spec.type) +
                             (spec.type == ParamType::Choice ? " (a whole number)" : ""));
}

}  // namespace

std::map<std::string, double> resolve_policy_params(
    const std::string& policy, const std::map<std::string, double>& overrides) {
    const PolicyInfo& info = known_policy(policy);
    std::map<std::string, double> params;
    for (const auto& s : info.params) params[s.name] = s.default_value;
    for (const auto& [key, value] : overrides) {
        auto spec = std::find_if(info.params.begin(), info.params.end(),
                                 [&key = key](const ParamSpec& s) { return s.name == key; });
        if (spec == info.params.end())
            throw InputError(Setting{"param"},
                             "policy '" + policy + "' has no parameter '" + key + "'");
        check_param(policy, *spec, value);
        params[key] = value;
    }
    return params;
}

GenerationConfig apply_own_decoding(GenerationConfig config, const std::string& policy) {
    const PolicyInfo* info = find_policy(policy);
    if (!info) return config;
    const OwnDecoding& own = info->own_decoding;
    if (own.threshold) config.threshold = *own.threshold;
    if (own.certainty_prior) config.certainty_prior = *own.certainty_prior;
    if (own.remasking) config.remasking = *own.remasking;
    return config;
}

std::unique_ptr<CachePolicy> create_policy(const std::string& name,
                                           const std::map<std::string, double>& params) {
    auto resolved = resolve_policy_params(name, params);
    for (const auto& e : registry())
        if (e.info.name == name) {
            auto p = e.factory();
            p->m_info = &e.info;
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

// Typed policy parameters: a policy keeps its parameters in a plain struct with default member
// initialisers and declares each member once (name, range, paper default, one-line meaning).
// From that one declaration come the ParamSpecs of the catalogue (CLI, sliders, validation) and
// the typed struct the policy reads (no lookups by string on the hot path):
//
//   struct Params {
//       int64_t refresh_interval = 8;
//       static const ParamList<Params>& list() {
//           static const ParamList<Params> l{
//               {"refresh_interval", &Params::refresh_interval, 1, 1024, 8, "N: full every N"}};
//           return l;
//       }
//   };
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/generation/policy_registry.h"

namespace cl {

template <typename P>
struct ParamDecl {
    ParamSpec spec;
    std::function<void(P&, double)> set;

    // The type follows the member: bool -> Switch, enum -> Choice (labels given), other integers
    // -> Integer, floating point -> Real. The default is the member's initialiser.
    template <typename M>
    ParamDecl(std::string name, M P::*member, double min, double max, double paper_default,
              std::string help, std::vector<std::string> choices = {}) {
        spec.name = std::move(name);
        spec.type = std::is_same_v<M, bool>       ? ParamType::Switch
                    : std::is_enum_v<M>           ? ParamType::Choice
                    : std::is_floating_point_v<M> ? ParamType::Real
                                                  : ParamType::Integer;
        spec.min = min;
        spec.max = max;
        spec.default_value = static_cast<double>(P{}.*member);
        spec.paper_default = paper_default;
        spec.choices = std::move(choices);
        spec.help = std::move(help);
        set = [member](P& p, double v) {
            if constexpr (std::is_same_v<M, bool>)
                p.*member = v != 0;
            else
                p.*member = static_cast<M>(v);
        };
    }
};

template <typename P>
class ParamList {
public:
    ParamList(std::initializer_list<ParamDecl<P>> decls) : m_decls(decls) {}

    std::vector<ParamSpec> specs() const {
        std::vector<ParamSpec> out;
        out.reserve(m_decls.size());
        for (const auto& d : m_decls) out.push_back(d.spec);
        return out;
    }
    // The typed parameters from resolved values (resolve_policy_params has validated them);
    // members not in `resolved` keep their defaults.
    P read(const std::map<std::string, double>& resolved) const {
        P p;
        for (const auto& d : m_decls)
            if (auto it = resolved.find(d.spec.name); it != resolved.end()) d.set(p, it->second);
        return p;
    }

private:
    std::vector<ParamDecl<P>> m_decls;
};

}  // namespace cl

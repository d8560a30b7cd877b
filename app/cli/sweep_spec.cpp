#include "app/cli/sweep_spec.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "app/cli/task_scoring.h"
#include "engine/base/errors.h"
#include "engine/generation/policy_registry.h"
#include "sweep/sweep_results.h"

namespace cl::cli {
namespace {

using nlohmann::json;

constexpr int kMaxPointsPerPolicy = 100000;
constexpr int kMaxItems = 500;

// Reads one spec file; every error names the file and the field.
class SpecReader {
public:
    explicit SpecReader(std::string file) : m_file(std::move(file)) {}

    [[noreturn]] void fail(const std::string& field, const std::string& why) const {
        throw InputError(m_file + ": " + field + ": " + why);
    }
    void only_keys(const json& obj, const std::string& field,
                   const std::set<std::string>& allowed) const {
        if (!obj.is_object()) fail(field, "must be an object");
        for (auto it = obj.begin(); it != obj.end(); ++it)
            if (!allowed.count(it.key()))
                fail(field.empty() ? it.key() : field + "." + it.key(), "unknown field");
    }
    double number(const json& v, const std::string& field) const {
        if (!v.is_number()) fail(field, "must be a number");
        return v.get<double>();
    }
    int64_t integer(const json& v, const std::string& field, int64_t lo, int64_t hi) const {
        const double d = number(v, field);
        if (d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi))
            fail(field,
                 "must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
        return static_cast<int64_t>(d);
    }
    std::vector<std::string> strings(const json& v, const std::string& field) const {
        if (!v.is_array() || v.empty()) fail(field, "must be a non-empty list of strings");
        std::vector<std::string> out;
        for (const auto& s : v) {
            if (!s.is_string()) fail(field, "must be a non-empty list of strings");
            out.push_back(s.get<std::string>());
        }
        return out;
    }

    void read_tasks(const json& t, SweepSpec& s) const {
        only_keys(t, "tasks", {"families", "items", "seed"});
        if (t.contains("families")) s.families = strings(t["families"], "tasks.families");
        try {
            check_scored_families(s.families, "tasks.families");
        } catch (const InputError& e) {
            throw InputError(m_file + ": " + e.what());
        }
        if (t.contains("items"))
            s.items = static_cast<int>(integer(t["items"], "tasks.items", 1, kMaxItems));
        if (t.contains("seed"))
            s.task_seed = static_cast<uint64_t>(integer(t["seed"], "tasks.seed", 0, INT64_MAX));
    }

    // A named choice (remasking, schedule), checked by the engine's own parser.
    template <typename Parse>
    void read_choice(const json& j, const char* key, std::string& out, Parse parse) const {
        if (!j.contains(key)) return;
        const std::string field = std::string("sampler.") + key;
        if (!j[key].is_string()) fail(field, "must be a string");
        out = j[key].get<std::string>();
        try {
            parse(out);
        } catch (const InputError& e) {
            fail(field, problem_of(e));
        }
    }

    void read_sampler(const json& j, SamplerOptions& o) const {
        only_keys(j, "sampler",
                  {"gen_length", "block_length", "steps", "temperature", "threshold", "remasking",
                   "schedule", "fresh_prefix", "seed"});
        if (j.contains("gen_length"))
            o.gen_length = integer(j["gen_length"], "sampler.gen_length", 1, 65536);
        if (j.contains("block_length"))
            o.block_length = integer(j["block_length"], "sampler.block_length", 1, 65536);
        if (j.contains("steps")) o.steps = integer(j["steps"], "sampler.steps", 1, 65536);
        if (j.contains("temperature"))
            o.temperature = number(j["temperature"], "sampler.temperature");
        if (o.temperature < 0 || o.temperature > 10)
            fail("sampler.temperature", "must be from 0 to 10");
        if (j.contains("threshold")) o.threshold = number(j["threshold"], "sampler.threshold");
        if (o.threshold < 0 || o.threshold > 1) fail("sampler.threshold", "must be from 0 to 1");
        read_choice(j, "remasking", o.remasking, parse_remasking);
        read_choice(j, "schedule", o.schedule, parse_transfer_schedule);
        if (j.contains("fresh_prefix") && j["fresh_prefix"].is_number())
            o.fresh_prefix =
                std::to_string(integer(j["fresh_prefix"], "sampler.fresh_prefix", 0, 65536));
        else
            read_choice(j, "fresh_prefix", o.fresh_prefix, parse_fresh_prefix);
        if (j.contains("seed"))
            o.seed = static_cast<uint64_t>(integer(j["seed"], "sampler.seed", 0, INT64_MAX));
    }

    ParamCandidates read_param(const ParamSpec& ps, const json& v, SweepSampling sampling,
                               const std::string& field) const {
        ParamCandidates c;
        c.name = ps.name;
        c.integral = ps.integral();
        auto check = [&](double x, const std::string& where) {
            if (x < ps.min || x > ps.max)
                fail(where, std::to_string(x) + " is outside [" + std::to_string(ps.min) + ", " +
                                std::to_string(ps.max) + "]");
            if (c.integral && x != std::floor(x)) fail(where, "must be a whole number");
        };
        if (v.is_array()) {
            if (v.empty()) fail(field, "empty list of values");
            for (size_t i = 0; i < v.size(); ++i) {
                const std::string where = field + "[" + std::to_string(i) + "]";
                c.values.push_back(choice_or_number(ps, v[i], where));
                check(c.values.back(), where);
            }
            return c;
        }
        if (!v.is_object())
            fail(field, "must be a list of values or {\"min\", \"max\"[, \"count\"]}");
        only_keys(v, field, {"min", "max", "count"});
        if (!v.contains("min") || !v.contains("max")) fail(field, "a range needs min and max");
        c.min = number(v["min"], field + ".min");
        c.max = number(v["max"], field + ".max");
        check(c.min, field + ".min");
        check(c.max, field + ".max");
        if (c.min > c.max) fail(field, "min is greater than max");
        if (v.contains("count"))
            c.count = static_cast<int>(integer(v["count"], field + ".count", 1, 1000));
        if (sampling == SweepSampling::Grid && c.count == 0)
            fail(field, "a grid over a range needs count (how many evenly spaced values)");
        return c;
    }

    // A Choice parameter may be given by its label.
    double choice_or_number(const ParamSpec& ps, const json& v, const std::string& where) const {
        if (!v.is_string()) return number(v, where);
        const auto label = v.get<std::string>();
        for (size_t i = 0; i < ps.choices.size(); ++i)
            if (ps.choices[i] == label) return ps.min + static_cast<double>(i);
        fail(where, "'" + label + "' is not a choice of " + ps.name);
    }

    PolicySweep read_policy(const json& j, size_t i) const {
        const std::string field = "policies[" + std::to_string(i) + "]";
        only_keys(j, field, {"policy", "sampling", "points", "params"});
        if (!j.contains("policy") || !j["policy"].is_string())
            fail(field + ".policy", "must name a policy");
        PolicySweep p;
        p.policy = j["policy"].get<std::string>();
        const PolicyInfo* info = find_policy(p.policy);
        if (!info) fail(field + ".policy", "unknown policy '" + p.policy + "'");
        p.sampling = read_sampling(j, field);
        if (p.sampling != SweepSampling::Grid) {
            if (!j.contains("points"))
                fail(field + ".points", "random and lhs sampling need points");
            p.points =
                static_cast<int>(integer(j["points"], field + ".points", 1, kMaxPointsPerPolicy));
        } else if (j.contains("points")) {
            fail(field + ".points", "only random and lhs sampling take points");
        }
        if (j.contains("params")) read_policy_params(*info, j["params"], field + ".params", p);
        return p;
    }

    SweepSampling read_sampling(const json& j, const std::string& field) const {
        if (!j.contains("sampling")) return SweepSampling::Grid;
        const auto& v = j["sampling"];
        if (v == "grid") return SweepSampling::Grid;
        if (v == "random") return SweepSampling::Random;
        if (v == "lhs") return SweepSampling::LatinHypercube;
        fail(field + ".sampling", "must be grid, random or lhs");
    }

    void read_policy_params(const PolicyInfo& info, const json& params, const std::string& field,
                            PolicySweep& p) const {
        if (!params.is_object()) fail(field, "must be an object of parameter: values");
        for (auto it = params.begin(); it != params.end(); ++it) {
            auto ps = std::find_if(info.params.begin(), info.params.end(),
                                   [&](const ParamSpec& s) { return s.name == it.key(); });
            if (ps == info.params.end()) {
                std::string known;
                for (const auto& s : info.params) known += (known.empty() ? "" : ", ") + s.name;
                fail(field + "." + it.key(),
                     info.name + " has no such parameter" +
                         (known.empty() ? " (it has none)" : " (it has " + known + ")"));
            }
            p.params.push_back(read_param(*ps, it.value(), p.sampling, field + "." + it.key()));
        }
    }

private:
    std::string m_file;
};

// A uniform double in [0, 1) from the generator's bits (the same on every standard library).
double unit(std::mt19937_64& rng) {
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

double snap(const ParamCandidates& c, double x) {
    return c.integral ? std::clamp(std::round(x), c.min, c.max) : x;
}

// The value of a candidate set at quantile u in [0, 1).
double value_at(const ParamCandidates& c, double u) {
    if (!c.values.empty()) {
        const auto i = std::min(c.values.size() - 1,
                                static_cast<size_t>(u * static_cast<double>(c.values.size())));
        return c.values[i];
    }
    if (c.integral) return std::min(c.max, std::floor(c.min + u * (c.max - c.min + 1)));
    return c.min + u * (c.max - c.min);
}

std::vector<double> grid_values(const ParamCandidates& c) {
    if (!c.values.empty()) return c.values;
    std::vector<double> out;
    for (int i = 0; i < c.count; ++i) {
        const double t = c.count == 1 ? 0.0 : static_cast<double>(i) / (c.count - 1);
        out.push_back(snap(c, c.min + t * (c.max - c.min)));
    }
    return out;
}

using Assignment = std::map<std::string, double>;

std::vector<Assignment> grid(const PolicySweep& p) {
    std::vector<Assignment> out{{}};
    for (const auto& c : p.params) {
        std::vector<Assignment> next;
        for (const auto& a : out)
            for (double v : grid_values(c)) {
                Assignment b = a;
                b[c.name] = v;
                next.push_back(std::move(b));
            }
        out = std::move(next);
    }
    return out;
}

std::vector<Assignment> random_draws(const PolicySweep& p, std::mt19937_64& rng) {
    std::vector<Assignment> out(static_cast<size_t>(p.points));
    for (auto& a : out)
        for (const auto& c : p.params) a[c.name] = value_at(c, unit(rng));
    return out;
}

// Each parameter's range cut into `points` strata, one draw per stratum, strata shuffled per
// parameter: every part of every range is tried with few points.
std::vector<Assignment> latin_hypercube(const PolicySweep& p, std::mt19937_64& rng) {
    const auto n = static_cast<size_t>(p.points);
    std::vector<Assignment> out(n);
    for (const auto& c : p.params) {
        std::vector<size_t> strata(n);
        for (size_t i = 0; i < n; ++i) strata[i] = i;
        for (size_t i = n; i > 1; --i) std::swap(strata[i - 1], strata[rng() % i]);
        for (size_t i = 0; i < n; ++i)
            out[i][c.name] =
                value_at(c, (static_cast<double>(strata[i]) + unit(rng)) / static_cast<double>(n));
    }
    return out;
}

std::vector<Assignment> assignments(const PolicySweep& p, uint64_t seed, size_t policy_index) {
    std::mt19937_64 rng(seed * 1000003 + policy_index);
    switch (p.sampling) {
        case SweepSampling::Grid:
            return grid(p);
        case SweepSampling::Random:
            return random_draws(p, rng);
        case SweepSampling::LatinHypercube:
            return latin_hypercube(p, rng);
    }
    return {};
}

}  // namespace

SweepSpec parse_sweep_spec(const json& j, const std::string& file) {
    SpecReader r(file);
    r.only_keys(
        j, "",
        {"format", "version", "name", "models", "devices", "tasks", "sampler", "seed", "policies"});
    if (!j.contains("format") || j["format"] != "cachelens-sweep")
        r.fail("format", "must be \"cachelens-sweep\"");
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != 1)
        r.fail("version", "must be 1 (this CacheLens reads sweep spec version 1)");
    SweepSpec s;
    s.families = {"arith", "reverse"};
    s.models = {"default"};
    s.devices = {"cpu"};
    if (j.contains("name")) {
        if (!j["name"].is_string()) r.fail("name", "must be a string");
        s.name = j["name"].get<std::string>();
    }
    if (j.contains("models")) s.models = r.strings(j["models"], "models");
    if (j.contains("devices")) s.devices = r.strings(j["devices"], "devices");
    for (const auto& d : s.devices)
        if (d != "cpu" && d != "cuda") r.fail("devices", "'" + d + "' is not cpu or cuda");
    if (j.contains("tasks"))
        r.read_tasks(j["tasks"], s);
    else
        r.read_tasks(json::object(), s);
    if (j.contains("sampler")) r.read_sampler(j["sampler"], s.sampler);
    if (j.contains("seed"))
        s.seed = static_cast<uint64_t>(r.integer(j["seed"], "seed", 0, INT64_MAX));
    if (!j.contains("policies") || !j["policies"].is_array() || j["policies"].empty())
        r.fail("policies", "must be a non-empty list");
    for (size_t i = 0; i < j["policies"].size(); ++i)
        s.policies.push_back(r.read_policy(j["policies"][i], i));
    s.canonical = j.dump();
    return s;
}

SweepSpec load_sweep_spec(const std::string& file) {
    const std::string text = read_text_file(file);
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {  // also out_of_range: a number like 8e3172
        throw InputError(file + ": not valid JSON (" + e.what() + ")");
    }
    return parse_sweep_spec(j, file);
}

std::vector<SweepPointSpec> expand_points(const SweepSpec& spec) {
    std::vector<SweepPointSpec> out;
    std::set<std::string> seen;
    auto add = [&](const std::string& model, const std::string& device, const std::string& policy,
                   const std::map<std::string, double>& params) {
        SweepPointSpec p{static_cast<int32_t>(out.size()),     "", model, device, policy,
                         resolve_policy_params(policy, params)};
        p.key = sweep::point_key(model, device, policy, p.params);
        if (seen.insert(p.key).second) out.push_back(std::move(p));
    };
    for (const auto& model : spec.models)
        for (const auto& device : spec.devices) {
            add(model, device, "none", {});
            for (size_t i = 0; i < spec.policies.size(); ++i)
                for (const auto& a : assignments(spec.policies[i], spec.seed, i))
                    add(model, device, spec.policies[i].policy, a);
        }
    return out;
}

}  // namespace cl::cli

#include "sessions/record_schema.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "engine/base/json_int.h"

namespace cl::sessions {

using trace::AttentionMap;
using trace::RunInfo;
using trace::RunStatus;
using trace::RunSummary;
using trace::StepRecord;
using trace::TriggerEvent;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// [SECTION] Values: one overload per C++ type a record field has

json trigger_to_json(const TriggerEvent& t);
void trigger_from_json(const json& j, TriggerEvent& t);

template <typename T>
json to_value(const T& v) {
    return json(v);
}
json to_value(double v) {
    return std::isfinite(v) ? json(v) : json(nullptr);
}
json to_value(RunStatus s) {
    return trace::to_string(s);
}
json to_value(const std::map<int32_t, std::string>& text) {
    json j = json::object();
    for (const auto& [id, t] : text) j[std::to_string(id)] = t;
    return j;
}
json to_value(const std::vector<TriggerEvent>& triggers) {
    json j = json::array();
    for (const auto& t : triggers) j.push_back(trigger_to_json(t));
    return j;
}

// A missing (null) value leaves the field at its default: older files have NULL columns.
template <typename T>
void from_value(const json& j, T& out) {
    if (j.is_null()) return;
    // Integers convert as stored (a uint64 seed lives in SQLite as its int64 bit pattern); a
    // floating-point value must be a whole number in range (get<T>() casts it: undefined).
    if constexpr (std::is_integral_v<T>)
        out = j.is_number_integer() ? j.get<T>() : json_int<T>(j);
    else
        out = j.get<T>();
}
// SQL has no booleans: an INTEGER column reads 0 or 1.
void from_value(const json& j, bool& out) {
    if (!j.is_null()) out = j.is_number() ? j.get<double>() != 0 : j.get<bool>();
}
void from_value(const json& j, double& out) {
    out = j.is_null() ? kNaN : j.get<double>();
}
void from_value(const json& j, RunStatus& out) {
    const auto s = j.get<std::string>();
    if (s == "running")
        out = RunStatus::Running;
    else if (s == "complete")
        out = RunStatus::Complete;
    else if (s == "aborted")
        out = RunStatus::Aborted;
    else
        throw SessionError("unknown run status '" + s + "'");
}
// Parameters are text; a number written by a script reads as its JSON text.
void from_value(const json& j, std::map<std::string, std::string>& out) {
    out.clear();
    for (const auto& [k, v] : j.items()) out[k] = v.is_string() ? v.get<std::string>() : v.dump();
}
void from_value(const json& j, std::map<int32_t, std::string>& out) {
    out.clear();
    for (const auto& [k, v] : j.items()) {
        size_t used = 0;
        const int id = std::stoi(k, &used);
        if (used != k.size()) throw SessionError("token id '" + k + "' is not a number");
        out[id] = v.get<std::string>();
    }
}
void from_value(const json& j, std::vector<TriggerEvent>& out) {
    out.clear();
    for (const auto& t : j) trigger_from_json(t, out.emplace_back());
}

// [SECTION] Table builders

template <typename Record, typename Access>
Field<Record> field(std::string_view name, Column column, std::string_view column_name,
                    std::string_view meaning, Access access) {
    return {name,
            column,
            column_name,
            meaning,
            [access](const Record& r) { return to_value(access(r)); },
            [access](Record& r, const json& j) { from_value(j, access(r)); }};
}
template <typename Record, typename Compute>
Field<Record> derived(std::string_view name, Column column, std::string_view meaning,
                      Compute compute) {
    return {name, column, {}, meaning, [compute](const Record& r) { return json(compute(r)); }, {}};
}

// `m` names a member, which cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define CL_MEMBER(m)       \
    [](auto& r) -> auto& { \
        return r.m;        \
    }
// NOLINTEND(bugprone-macro-parentheses)

template <typename Record>
json record_to_json(const std::vector<Field<Record>>& fields, const Record& r) {
    json j = json::object();
    for (const auto& f : fields) j[std::string(f.name)] = f.get(r);
    return j;
}

// Sets every known key; an unknown key, or a value of the wrong type, is an error naming it.
template <typename Record>
void record_from_json(const std::vector<Field<Record>>& fields, const json& j, Record& r,
                      const std::vector<std::string_view>& also_known = {}) {
    if (!j.is_object()) throw SessionError("expected a JSON object");
    for (const auto& [key, value] : j.items()) {
        const Field<Record>* found = nullptr;
        for (const auto& f : fields)
            if (f.name == key) found = &f;
        if (!found) {
            bool known = false;
            for (auto k : also_known) known = known || k == key;
            if (!known) throw SessionError("unknown key '" + key + "'");
            continue;
        }
        if (found->derived()) continue;
        try {
            found->set(r, value);
        } catch (const std::exception& e) {
            throw SessionError("key '" + key + "': " + e.what());
        }
    }
}

json trigger_to_json(const TriggerEvent& t) {
    return record_to_json(trigger_fields(), t);
}
void trigger_from_json(const json& j, TriggerEvent& t) {
    record_from_json(trigger_fields(), j, t);
}

}  // namespace

// [SECTION] Tables

const std::vector<Field<RunInfo>>& run_fields() {
    using C = Column;
    static const std::vector<Field<RunInfo>> fields{
        field<RunInfo>("run_id", C::None, "", "the run's id in its session", CL_MEMBER(run_id)),
        field<RunInfo>("policy", C::Text, "", "cache policy name, e.g. dkv-decode",
                       CL_MEMBER(policy)),
        field<RunInfo>("policy_params", C::Json, "params_json",
                       "resolved policy parameters (name -> value as text)",
                       CL_MEMBER(policy_params)),
        field<RunInfo>("sampler", C::Json, "sampler_json",
                       "generation settings (name -> value as text)", CL_MEMBER(sampler)),
        field<RunInfo>("model_name", C::Text, "", "model folder name", CL_MEMBER(model_name)),
        field<RunInfo>("model_hash", C::Text, "", "content hash of the weights",
                       CL_MEMBER(model_hash)),
        field<RunInfo>("noise_process", C::Text, "",
                       "the model's noise process: masked or uniform (v3; older runs: masked)",
                       CL_MEMBER(noise_process)),
        field<RunInfo>("architecture", C::Text, "",
                       "the model's architecture: llada or dream (v6; older runs: llada)",
                       CL_MEMBER(architecture)),
        field<RunInfo>("device", C::Text, "", "cpu or cuda:N", CL_MEMBER(device)),
        field<RunInfo>("dtype", C::Text, "",
                       "weights and activations: fp32 or bf16 (v7; older runs: fp32)",
                       CL_MEMBER(dtype)),
        field<RunInfo>("kernels", C::Text, "",
                       "the kernel set its steps ran at: fast (the row kernels) or reference "
                       "(plain LibTorch ops: the same tokens, slower) (v9; older runs: fast)",
                       CL_MEMBER(kernels)),
        field<RunInfo>("threads", C::Integer, "", "CPU threads", CL_MEMBER(threads)),
        field<RunInfo>("seed", C::Integer, "", "sampling seed", CL_MEMBER(seed)),
        field<RunInfo>("prompt_text", C::Text, "prompt", "the prompt as typed",
                       CL_MEMBER(prompt_text)),
        field<RunInfo>("prompt_len", C::Integer, "", "P, prompt tokens", CL_MEMBER(prompt_len)),
        field<RunInfo>("gen_len", C::Integer, "", "G, generated positions", CL_MEMBER(gen_len)),
        field<RunInfo>("block_len", C::Integer, "", "B, block length", CL_MEMBER(block_len)),
        field<RunInfo>("steps", C::Integer, "steps_planned", "T, planned steps", CL_MEMBER(steps)),
        field<RunInfo>("n_layers", C::Integer, "", "N, transformer layers", CL_MEMBER(n_layers)),
        field<RunInfo>("n_heads", C::Integer, "", "attention heads", CL_MEMBER(n_heads)),
        field<RunInfo>("attention_tile", C::Integer, "",
                       "keys per stored cell of the run's head-mean attention maps, chosen to fit "
                       "its attention budget; 1 = full resolution (v8; older runs: 1)",
                       CL_MEMBER(attention_tile)),
        field<RunInfo>("mask_id", C::Integer, "", "id of [MASK]", CL_MEMBER(mask_id)),
        field<RunInfo>("eos_id", C::Integer, "", "id of end-of-sequence", CL_MEMBER(eos_id)),
        field<RunInfo>("app_version", C::Text, "", "CacheLens version that ran it",
                       CL_MEMBER(app_version)),
        field<RunInfo>("token_text", C::Json, "token_text_json",
                       "id -> text of the ids in the initial sequence", CL_MEMBER(token_text)),
        field<RunInfo>("initial_tokens", C::None, "",
                       "(L) prompt ++ [MASK]*G (uniform noise: random tokens); stored as array "
                       "`initial_tokens` at step -1",
                       CL_MEMBER(initial_tokens)),
    };
    return fields;
}

const std::vector<Field<StepRecord>>& step_fields() {
    using C = Column;
    static const std::vector<Field<StepRecord>> fields{
        field<StepRecord>("run_id", C::None, "", "the run's id", CL_MEMBER(run_id)),
        field<StepRecord>("step", C::Integer, "", "0-based global step", CL_MEMBER(step)),
        field<StepRecord>("block", C::Integer, "", "current block index", CL_MEMBER(block)),
        field<StepRecord>("step_in_block", C::Integer, "", "step within the block",
                          CL_MEMBER(step_in_block)),
        field<StepRecord>("seq_len", C::Integer, "", "L, sequence length", CL_MEMBER(seq_len)),
        field<StepRecord>("n_layers", C::Integer, "", "N, layers", CL_MEMBER(n_layers)),
        field<StepRecord>("wall_ms", C::Real, "", "wall time of the whole step",
                          CL_MEMBER(wall_ms)),
        field<StepRecord>("flops", C::Real, "", "analytical FLOPs computed", CL_MEMBER(flops)),
        field<StepRecord>("flops_full", C::Real, "", "analytical FLOPs of a full forward",
                          CL_MEMBER(flops_full)),
        derived<StepRecord>("recompute_fraction", C::Real,
                            "fraction of (layer, row) pairs recomputed (derived from actions)",
                            [](const StepRecord& r) { return r.recompute_fraction(); }),
        derived<StepRecord>("n_committed", C::Integer,
                            "positions committed this step (derived from committed)",
                            [](const StepRecord& r) { return r.committed.size(); }),
        field<StepRecord>("triggers", C::Json, "triggers_json",
                          "refresh decisions and drift tests (fields below)", CL_MEMBER(triggers)),
        field<StepRecord>("new_token_text", C::Json, "token_text_json",
                          "id -> text of ids seen for the first time at this step",
                          CL_MEMBER(new_token_text)),
        field<StepRecord>("has_oracle", C::Integer, "", "an oracle comparison was made",
                          CL_MEMBER(has_oracle)),
        field<StepRecord>("oracle_logits_kl", C::Real, "",
                          "oracle: mean KL(full || cached) over decodable rows",
                          CL_MEMBER(oracle.logits_kl)),
        field<StepRecord>("oracle_commit_differs", C::Integer, "",
                          "oracle: the full forward would commit other tokens",
                          CL_MEMBER(oracle.commit_differs)),
        field<StepRecord>("has_drift", C::Integer, "",
                          "the drift probe measured this step (v3; drift_* arrays)",
                          CL_MEMBER(has_drift)),
    };
    return fields;
}

const std::vector<Field<RunSummary>>& summary_fields() {
    using C = Column;
    static const std::vector<Field<RunSummary>> fields{
        field<RunSummary>("status", C::None, "", "running, complete or aborted", CL_MEMBER(status)),
        field<RunSummary>("steps", C::None, "", "steps taken", CL_MEMBER(steps)),
        field<RunSummary>("generated_tokens", C::None, "", "tokens up to the first EOS",
                          CL_MEMBER(generated_tokens)),
        field<RunSummary>("wall_ms", C::None, "", "wall time of the run", CL_MEMBER(wall_ms)),
        field<RunSummary>("tokens_per_s", C::None, "", "generated tokens per second",
                          CL_MEMBER(tokens_per_s)),
        field<RunSummary>("flops", C::None, "", "analytical FLOPs computed", CL_MEMBER(flops)),
        field<RunSummary>("flops_full", C::None, "", "FLOPs of full forwards at every step",
                          CL_MEMBER(flops_full)),
        field<RunSummary>("recompute_fraction", C::None, "", "mean over steps",
                          CL_MEMBER(recompute_fraction)),
        field<RunSummary>("final_tokens", C::None, "", "(L) ids at the end",
                          CL_MEMBER(final_tokens)),
        field<RunSummary>("final_text", C::None, "", "the generated text", CL_MEMBER(final_text)),
    };
    return fields;
}

const std::vector<Field<TriggerEvent>>& trigger_fields() {
    using C = Column;
    static const std::vector<Field<TriggerEvent>> fields{
        field<TriggerEvent>("kind", C::None, "", "interval, block-start, drift, v-verify, ...",
                            CL_MEMBER(kind)),
        field<TriggerEvent>("layer", C::None, "", "layer, -1 = whole model", CL_MEMBER(layer)),
        field<TriggerEvent>("row", C::None, "", "row, -1 = not tied to one", CL_MEMBER(row)),
        field<TriggerEvent>("value", C::None, "", "measured value (null if none)",
                            CL_MEMBER(value)),
        field<TriggerEvent>("threshold", C::None, "", "threshold it was tested against",
                            CL_MEMBER(threshold)),
        field<TriggerEvent>("fired", C::None, "", "whether it caused a refresh", CL_MEMBER(fired)),
        field<TriggerEvent>("action", C::None, "", "what followed, in words", CL_MEMBER(action)),
    };
    return fields;
}

#undef CL_MEMBER

// [SECTION] Whole records

json to_json(const RunInfo& info) {
    return record_to_json(run_fields(), info);
}
json to_json(const RunSummary& summary) {
    return record_to_json(summary_fields(), summary);
}

json to_json(const AttentionMap& m) {
    return {{"layer", m.layer},       {"head", m.head},           {"rows", m.rows},
            {"cols", m.cols},         {"keys", m.key_count()},    {"key_tile", m.key_tile},
            {"row_tile", m.row_tile}, {"row_index", m.row_index}, {"row_scale", m.row_scale},
            {"levels", m.levels}};
}

json step_scalars_json(const StepRecord& r) {
    return record_to_json(step_fields(), r);
}

json to_json(const StepRecord& r, bool with_attention) {
    json j = step_scalars_json(r);
    for (const auto& a : step_arrays())
        if (array_expected(a, r)) j[std::string(a.name)] = a.to_json(r);
    if (with_attention) {
        json maps = json::array();
        for (const auto& m : r.attention) maps.push_back(to_json(m));
        j["attention"] = maps;
    }
    return j;
}

void from_json(const json& j, RunInfo& info) {
    record_from_json(run_fields(), j, info);
}
void from_json(const json& j, RunSummary& summary) {
    record_from_json(summary_fields(), j, summary);
}

void from_json(const json& j, AttentionMap& m) {
    try {
        m.layer = json_int<int32_t>(j.at("layer"));
        m.head = json_int<int32_t>(j.at("head"));
        m.rows = json_int<int32_t>(j.at("rows"));
        m.cols = json_int<int32_t>(j.at("cols"));
        m.keys = j.contains("keys") ? json_int<int32_t>(j.at("keys")) : m.cols;
        m.key_tile = j.contains("key_tile") ? json_int<int32_t>(j.at("key_tile")) : 1;
        m.row_tile = j.contains("row_tile") ? json_int<int32_t>(j.at("row_tile")) : 1;
        if (m.key_tile < 1 || m.row_tile < 1 || m.keys < 0 ||
            m.cols != (int64_t{m.keys} + m.key_tile - 1) / m.key_tile)
            throw SessionError("attention map: tiles " + std::to_string(m.row_tile) + "x" +
                               std::to_string(m.key_tile) + " do not give " +
                               std::to_string(m.cols) + " columns of " + std::to_string(m.keys) +
                               " keys");
        m.row_index = json_ints<int32_t>(j.at("row_index"));
        m.row_scale = j.at("row_scale").get<std::vector<float>>();
        m.levels = json_ints<uint8_t>(j.at("levels"));
    } catch (const json::exception& e) {
        throw SessionError(std::string("attention map: ") + e.what());
    } catch (const std::range_error& e) {
        throw SessionError(std::string("attention map: ") + e.what());
    }
}

void from_json(const json& j, StepRecord& r) {
    std::vector<std::string_view> arrays{"attention"};
    for (const auto& a : step_arrays()) arrays.push_back(a.name);
    record_from_json(step_fields(), j, r, arrays);
    for (const auto& a : step_arrays())
        if (auto it = j.find(std::string(a.name)); it != j.end()) {
            try {
                a.from_json(r, *it);
            } catch (const std::exception& e) {
                throw SessionError("array '" + std::string(a.name) + "': " + e.what());
            }
        }
    if (auto it = j.find("attention"); it != j.end())
        for (const auto& m : *it) from_json(m, r.attention.emplace_back());
}

}  // namespace cl::sessions

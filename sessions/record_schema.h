// The one description of the trace records' serial form: every field of RunInfo, StepRecord,
// RunSummary and TriggerEvent, with its JSON key, its session column (or array) and its meaning.
//
// Every reader and writer goes through these tables: the session writer and reader (SQL columns
// and typed arrays), JSON (JSON lines, `sessions export --format json`, the app's export), the
// per-step CSV (step_csv.h) and docs/session-format.md (schema_markdown(), compared with the
// document by a test). Adding a field means adding one row here; nothing else is hand-mirrored.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/trace/trace_types.h"
#include "sessions/blob_codec.h"

namespace cl::sessions {

using json = nlohmann::json;

// How a scalar field is stored in its SQL table.
enum class Column : uint8_t {
    None,     // not a column (JSON only, or stored elsewhere)
    Integer,  // INTEGER (bools as 0/1)
    Real,     // REAL (NaN stored as NULL)
    Text,     // TEXT
    Json,     // TEXT holding JSON
};

// One scalar field of Record: its JSON key is `name` (the C++ member's name); `column` is its
// SQL column name where that differs (older files fixed some names).
template <typename Record>
struct Field {
    std::string_view name;
    Column column = Column::None;
    std::string_view column_name;  // empty: same as name
    std::string_view meaning;
    std::function<json(const Record&)> get;
    std::function<void(Record&, const json&)> set;  // empty for derived fields (written only)

    std::string_view sql_name() const { return column_name.empty() ? name : column_name; }
    bool derived() const { return !set; }
};

// The shape of a per-step array in terms of the record: L, (N, L), (L, kTopK) or its own length.
enum class Extent : uint8_t { L, NxL, LxK, Own };
// When an array is present: always, when the step has top-k data, when it has an oracle record.
enum class Presence : uint8_t { Always, WithTopK, WithOracle, WithDrift };

// One per-step array of StepRecord, stored as a row of the `array` table.
struct ArrayField {
    std::string_view name;
    std::string_view dtype;  // "i32" | "u8" | "u16" | "f32"
    Extent extent = Extent::L;
    Presence presence = Presence::Always;
    bool compress = true;
    std::string_view meaning;
    std::function<size_t(const trace::StepRecord&)> size;
    std::function<EncodedArray(const trace::StepRecord&)> encode;
    // Decodes one stored array into the record; throws SessionError on a dtype, size or value
    // that does not fit (sizes against the record's L and N are checked by check_arrays).
    std::function<void(trace::StepRecord&, const std::string& dtype, const std::string& shape,
                       const std::string& encoding, const uint8_t* data, size_t bytes)>
        decode;
    std::function<json(const trace::StepRecord&)> to_json;
    std::function<void(trace::StepRecord&, const json&)> from_json;
};

const std::vector<Field<trace::RunInfo>>& run_fields();
const std::vector<Field<trace::StepRecord>>& step_fields();
const std::vector<ArrayField>& step_arrays();
const std::vector<Field<trace::RunSummary>>& summary_fields();
const std::vector<Field<trace::TriggerEvent>>& trigger_fields();
// The run's initial tokens are a run-level array (`array` row at step -1).
constexpr std::string_view kInitialTokensArray = "initial_tokens";

const ArrayField* find_array(std::string_view name);  // nullptr when unknown
bool array_expected(const ArrayField& field, const trace::StepRecord& r);
// Throws SessionError (prefixed by `where`) when an expected array is missing or sized wrongly.
void check_arrays(const trace::StepRecord& r, const std::string& where);

// JSON of whole records, built from the tables. from_json rejects unknown keys and values of the
// wrong type with SessionError naming the key.
json to_json(const trace::RunInfo& info);
json to_json(const trace::RunSummary& summary);
json to_json(const trace::StepRecord& r, bool with_attention);
json to_json(const trace::AttentionMap& m);
void from_json(const json& j, trace::RunInfo& info);
void from_json(const json& j, trace::RunSummary& summary);
void from_json(const json& j, trace::StepRecord& r);
void from_json(const json& j, trace::AttentionMap& m);

// The per-step scalars only (what the step table holds), keyed by field name.
json step_scalars_json(const trace::StepRecord& r);

// The field tables as the markdown of docs/session-format.md's generated section.
std::string schema_markdown();

}  // namespace cl::sessions

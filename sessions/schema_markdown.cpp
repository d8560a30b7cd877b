// schema_markdown(): the field tables of record_schema.h as the generated section of
// docs/session-format.md (a test keeps the document equal to this text).
#include <sstream>

#include "sessions/record_schema.h"

namespace cl::sessions {

namespace {

const char* column_type(Column c) {
    switch (c) {
        case Column::None:
            return "-";
        case Column::Integer:
            return "INTEGER";
        case Column::Real:
            return "REAL";
        case Column::Text:
            return "TEXT";
        case Column::Json:
            return "TEXT (JSON)";
    }
    return "?";
}

const char* extent_name(Extent e) {
    switch (e) {
        case Extent::L:
            return "L";
        case Extent::NxL:
            return "N,L";
        case Extent::LxK:
            return "L,5";
        case Extent::Own:
            return "n";
    }
    return "?";
}

const char* presence_name(Presence p) {
    switch (p) {
        case Presence::Always:
            return "always";
        case Presence::WithTopK:
            return "steps with top-k data";
        case Presence::WithOracle:
            return "`has_oracle` steps";
        case Presence::WithDrift:
            return "`has_drift` steps";
    }
    return "?";
}

template <typename Record>
void field_table(std::ostringstream& out, const std::vector<Field<Record>>& fields,
                 bool with_columns) {
    if (with_columns) {
        out << "| JSON key | column | SQL type | meaning |\n|---|---|---|---|\n";
    } else {
        out << "| JSON key | meaning |\n|---|---|\n";
    }
    for (const auto& f : fields) {
        out << "| `" << f.name << "` | ";
        if (with_columns) {
            if (f.column == Column::None)
                out << "- | - | ";
            else
                out << '`' << f.sql_name() << "` | " << column_type(f.column) << " | ";
        }
        out << f.meaning << (f.derived() ? " (written, not read back)" : "") << " |\n";
    }
}

}  // namespace

std::string schema_markdown() {
    std::ostringstream out;
    out << "### Run (`run` table; JSON `run_start`)\n\n";
    field_table(out, run_fields(), true);
    out << "\n### Step scalars (`step` table; JSON `step`)\n\n";
    field_table(out, step_fields(), true);
    out << "\n### Step arrays (`array` table, keyed by `name`; JSON arrays of the same name)\n\n"
        << "| name | dtype | shape | present | meaning |\n|---|---|---|---|---|\n";
    for (const auto& a : step_arrays())
        out << "| `" << a.name << "` | " << a.dtype << " | " << extent_name(a.extent) << " | "
            << presence_name(a.presence) << " | " << a.meaning << " |\n";
    out << "\n### Trigger events (elements of `triggers`)\n\n";
    field_table(out, trigger_fields(), false);
    out << "\n### Run summary (`run.summary_json`; JSON `run_end`)\n\n";
    field_table(out, summary_fields(), false);
    return out.str();
}

}  // namespace cl::sessions

#include "sessions/step_csv.h"

namespace cl::sessions {

namespace {

bool in_csv(const Field<trace::StepRecord>& f) {
    return f.column == Column::Integer || f.column == Column::Real;
}

// RFC 4180: quote a value holding a comma, a quote or a line break; double inner quotes.
std::string csv_text(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

}  // namespace

void write_step_csv_header(std::ostream& out) {
    out << "run_id,policy";
    for (const auto& f : step_fields())
        if (in_csv(f)) out << ',' << f.name;
    out << '\n';
}

void write_step_csv_row(std::ostream& out, int64_t run_id, const std::string& policy,
                        const json& scalars) {
    out << run_id << ',' << csv_text(policy);
    for (const auto& f : step_fields()) {
        if (!in_csv(f)) continue;
        const auto it = scalars.find(std::string(f.name));
        out << ',';
        if (it == scalars.end() || it->is_null()) continue;  // empty cell: no value
        if (it->is_boolean())
            out << int{it->get<bool>()};
        else
            out << it->dump();
    }
    out << '\n';
}

}  // namespace cl::sessions

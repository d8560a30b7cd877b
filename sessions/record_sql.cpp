#include "sessions/record_sql.h"

namespace cl::sessions {

void bind_value(Stmt& s, int index, Column column, const json& value) {
    switch (column) {
        case Column::Integer:
            if (value.is_boolean())
                s.bind(index, int64_t{value.get<bool>()});
            else if (value.is_number_unsigned())  // seeds above 2^63 keep their bits
                s.bind(index, static_cast<int64_t>(value.get<uint64_t>()));
            else
                s.bind(index, value.get<int64_t>());
            return;
        case Column::Real:
            if (value.is_null())
                s.bind_null(index);
            else
                s.bind(index, value.get<double>());
            return;
        case Column::Text:
            s.bind(index, value.get<std::string>());
            return;
        case Column::Json:
            s.bind(index, value.dump());
            return;
        case Column::None:
            break;
    }
    throw SessionError("field has no column");
}

json column_value(const Stmt& s, int index, Column column) {
    if (s.col_null(index)) return nullptr;
    switch (column) {
        case Column::Integer:
            return s.col_int(index);
        case Column::Real:
            return s.col_double(index);
        case Column::Text:
            return s.col_text(index);
        case Column::Json: {
            const std::string text = s.col_text(index);
            if (text.empty()) return nullptr;
            try {
                return json::parse(text);
            } catch (const json::parse_error& e) {
                // The parser's own message ("[json.exception.parse_error.101] ...") means
                // nothing to a user; where it broke does.
                throw SessionError("corrupt (not valid JSON at byte " + std::to_string(e.byte) +
                                   " of " + std::to_string(text.size()) + ")");
            } catch (const json::exception&) {  // out_of_range: a number like 8e3172
                throw SessionError("corrupt (a number out of range)");
            }
        }
        case Column::None:
            break;
    }
    throw SessionError("field has no column");
}

}  // namespace cl::sessions

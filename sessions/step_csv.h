// The per-step CSV: one row per step of each run, one column per numeric step field of
// record_schema.h (JSON-valued fields such as triggers are left to the JSON export). The CLI's
// `sessions export --format csv` and the app's metrics export both write it through here.
#pragma once

#include <ostream>
#include <string>

#include "sessions/record_schema.h"

namespace cl::sessions {

void write_step_csv_header(std::ostream& out);
// `scalars`: step_scalars_json(record) or a row of SessionReader::step_scalars.
void write_step_csv_row(std::ostream& out, int64_t run_id, const std::string& policy,
                        const json& scalars);

}  // namespace cl::sessions

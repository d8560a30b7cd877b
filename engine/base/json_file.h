// A --json results file, one definition for the CLI's commands and the bench drivers: checked
// before the work that fills it (minutes of runs must not end in a file that cannot be written),
// written once at the end and checked; each failure an InputError naming the file.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <ios>
#include <string>
#include <system_error>

#include "engine/base/errors.h"

namespace cl {

// Throws when a non-empty path cannot be opened for writing. An existing file is opened for
// appending, so it keeps its contents until the results replace them; a file the check creates is
// removed again, so a run that fails later leaves nothing behind.
inline void check_json_writable(const std::string& path) {
    if (path.empty()) return;
    std::error_code ec;
    const bool existed = std::filesystem::exists(path, ec);
    if (!std::ofstream(path, std::ios::app)) throw InputError(path, "cannot open for writing");
    if (!existed) std::filesystem::remove(path, ec);
}

// Writes results (indented, one trailing newline) to path, replacing the file.
inline void write_json_file(const std::string& path, const nlohmann::json& results) {
    std::ofstream out(path);
    if (!out) throw InputError(path, "cannot open for writing");
    out << results.dump(2) << '\n';
    out.flush();
    if (!out) throw InputError(path, "write failed");
}

}  // namespace cl

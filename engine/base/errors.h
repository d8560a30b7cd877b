// Error types that map onto the command-line exit codes (ARCHITECTURE.md "Command-line contract").
//
// Engine errors are worded in engine terms: an error about a setting names it as the engine does
// (`gen_length`, `policy`, `param`, `device`), and each front end words it for its users (the CLI
// turns `gen_length: ...` into `--gen-length: ...`, see cli_message; the app shows it as is).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace cl {

// The engine setting an error is about, e.g. Setting{"gen_length"}.
struct Setting {
    std::string name;
};

// Bad input from the user: a model folder, tokenizer, prompt, parameter or session file.
// Exit code 2. The message names the file or setting and what is wrong, on one line.
class InputError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
    InputError(const std::filesystem::path& file, const std::string& problem)
        : std::runtime_error(file.string() + ": " + problem) {}
    InputError(Setting setting, const std::string& problem)
        : std::runtime_error(setting.name + ": " + problem), m_setting(std::move(setting.name)) {}
    // The setting at fault ("" when the error is about a file or has no single setting).
    const std::string& setting() const { return m_setting; }

private:
    std::string m_setting;
};

// Something failed while running (out of memory, a device error). Exit code 1.
class RuntimeFailure : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The problem alone, without the setting's name in front ("expected x, got y").
inline std::string problem_of(const InputError& e) {
    std::string what = e.what();
    const std::string& name = e.setting();
    if (name.empty() || what.compare(0, name.size(), name) != 0 ||
        what.compare(name.size(), 2, ": ") != 0)
        return what;
    return what.substr(name.size() + 2);
}

// The message for a command line: a setting's engine name becomes its flag ("gen_length: x" ->
// "--gen-length: x"); other messages are unchanged.
inline std::string cli_message(const InputError& e) {
    std::string what = e.what();
    if (e.setting().empty() || what.rfind(e.setting(), 0) != 0) return what;
    std::string flag = "--" + e.setting();
    for (auto& c : flag)
        if (c == '_') c = '-';
    return flag + what.substr(e.setting().size());
}

}  // namespace cl

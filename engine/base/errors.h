// Error types that map onto the command-line exit codes (ARCHITECTURE.md "Command-line contract").
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace cl {

// Bad input from the user: a model folder, tokenizer, prompt, parameter or session file.
// Exit code 2. The message names the file or option and what is wrong, on one line.
class InputError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
    InputError(const std::filesystem::path& file, const std::string& problem)
        : std::runtime_error(file.string() + ": " + problem) {}
};

// Something failed while running (out of memory, a device error). Exit code 1.
class RuntimeFailure : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace cl

// Running cachelens-cli as a user does (a process, its exit code and output), for the CLI suites.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace cl::test {

struct CliResult {
    int code;
    std::string out;  // stdout + stderr
};

inline CliResult cli(const std::string& args) {
    const std::string cmd = std::string(CL_CLI_PATH) + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    std::array<char, 4096> buf;
    while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
    const int status = pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace cl::test

// Shared by the libFuzzer harnesses: the input as a file (the readers under test open paths, as
// they do for users' files), removed again after the run.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace cl::fuzz {

// Writes `size` bytes to `path` (replacing it).
inline void write_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// A private scratch folder for this process (fuzzers may run in parallel jobs).
inline const std::filesystem::path& scratch_dir() {
    static const std::filesystem::path dir = [] {
        auto d = std::filesystem::temp_directory_path() /
                 ("cachelens-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        return d;
    }();
    return dir;
}

}  // namespace cl::fuzz

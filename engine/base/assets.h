// Where the installed data lives (the embedded default model, the lessons): found at run time
// relative to the executable, never through a compile-time source path, so a build tree, an
// installed prefix and a moved copy all work.
//
// Order: $CACHELENS_ASSETS; <exe dir>/../share/cachelens/assets (an install prefix, and the build
// tree, where CMake links it); <exe dir>/assets (a folder copied next to the executable).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace cl {

inline std::filesystem::path executable_dir() {
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path() : exe.parent_path();
}

// The assets folder, or "" when none of the candidates exists.
inline std::filesystem::path assets_dir() {
    if (const char* env = std::getenv("CACHELENS_ASSETS"); env && *env) return env;
    const auto exe = executable_dir();
    if (exe.empty()) return {};
    for (const auto& candidate : {exe / ".." / "share" / "cachelens" / "assets", exe / "assets"}) {
        std::error_code ec;
        if (std::filesystem::is_directory(candidate, ec))
            return std::filesystem::weakly_canonical(candidate, ec);
    }
    return {};
}

}  // namespace cl

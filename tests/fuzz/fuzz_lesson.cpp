// libFuzzer harness: an arbitrary file loaded as a lesson (.lesson.json). Bad files must end in a
// std::runtime_error naming the file, never a crash.
#include <cstdint>
#include <stdexcept>

#include "fuzz_util.h"
#include "viz/lesson.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = cl::fuzz::scratch_dir() / "fuzz.lesson.json";
    cl::fuzz::write_file(path, data, size);
    try {
        const auto lesson = cl::viz::load_lesson(path.string());
        if (lesson.steps.empty()) __builtin_trap();  // a lesson that loads has steps
    } catch (const std::runtime_error&) {
    }
    return 0;
}

// libFuzzer harness: an arbitrary file loaded as a sweep spec. Bad specs must end in an
// InputError naming the file and the field; a spec that loads must expand into points.
#include <cstdint>

#include "app/cli/sweep_spec.h"
#include "engine/base/errors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = cl::fuzz::scratch_dir() / "spec.json";
    cl::fuzz::write_file(path, data, size);
    try {
        const auto spec = cl::cli::load_sweep_spec(path.string());
        if (cl::cli::expand_points(spec).empty()) __builtin_trap();  // at least the baseline
    } catch (const cl::InputError&) {
    }
    return 0;
}

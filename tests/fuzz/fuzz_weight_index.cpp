// libFuzzer harness: an arbitrary model.safetensors.index.json in a folder that holds two shards.
// Every file the reader returns must exist inside the folder; bad indexes must end in an
// InputError naming the file.
#include <cstdint>
#include <filesystem>

#include "engine/base/errors.h"
#include "engine/model/weight_files.h"
#include "fuzz_util.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const fs::path dir = [] {
        const auto d = cl::fuzz::scratch_dir() / "index";
        fs::create_directories(d);
        for (const char* shard :
             {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
            cl::fuzz::write_file(d / shard, reinterpret_cast<const uint8_t*>("x"), 1);
        return d;
    }();
    cl::fuzz::write_file(dir / "model.safetensors.index.json", data, size);
    try {
        for (const auto& file : cl::find_weight_files(dir)) {
            if (file.parent_path() != dir || !fs::is_regular_file(file)) __builtin_trap();
        }
    } catch (const cl::InputError&) {
    }
    return 0;
}

// libFuzzer harness: an arbitrary file opened as a safetensors file. Every tensor the reader
// accepts must lie inside the mapping: all its bytes are read (ASan catches an overrun). Bad files
// must end in an InputError naming the file.
#include <cstdint>

#include "engine/base/errors.h"
#include "engine/model/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = cl::fuzz::scratch_dir() / "model.safetensors";
    cl::fuzz::write_file(path, data, size);
    try {
        const auto file = cl::SafetensorsFile::open(path);
        volatile uint8_t sum = 0;
        for (const auto& t : file->tensors()) {
            const std::byte* p = file->data(t);
            for (size_t i = 0; i < t.nbytes; ++i) sum = sum + static_cast<uint8_t>(p[i]);
            if (t.dtype == cl::DType::F16 && t.nbytes >= 2)
                (void)cl::half_to_float(static_cast<uint16_t>(static_cast<uint8_t>(p[0]) |
                                                              static_cast<uint8_t>(p[1]) << 8));
            if (file->find(t.name) != &t) __builtin_trap();  // the index agrees with the list
        }
    } catch (const cl::InputError&) {
    }
    return 0;
}

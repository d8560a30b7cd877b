// libFuzzer harness: the session blob decoder must reject any input cleanly (SessionError), never
// crash or over-allocate. Input layout: [dtype byte][encoding byte][shape text until '\n'][blob].
#include <cstdint>
#include <string>

#include "sessions/blob_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 3) return 0;
    static const char* dtypes[] = {"i32", "u8", "u16", "f32", "f64", "bad"};
    static const char* encodings[] = {"raw", "zstd", "lz4"};
    const std::string dtype = dtypes[data[0] % 6];
    const std::string encoding = encodings[data[1] % 3];
    size_t i = 2;
    std::string shape;
    while (i < size && data[i] != '\n' && shape.size() < 64)
        shape.push_back(static_cast<char>(data[i++]));
    if (i < size) ++i;
    try {
        using namespace cl::sessions;
        switch (data[0] % 5) {
            case 0:
                decode_array<int32_t>(dtype, shape, encoding, data + i, size - i);
                break;
            case 1:
                decode_array<uint8_t>(dtype, shape, encoding, data + i, size - i);
                break;
            case 2:
                decode_array<uint16_t>(dtype, shape, encoding, data + i, size - i);
                break;
            case 3:
                decode_array<float>(dtype, shape, encoding, data + i, size - i);
                break;
            default:
                decode_array<double>(dtype, shape, encoding, data + i, size - i);
                break;
        }
    } catch (const cl::sessions::SessionError&) {
    }
    return 0;
}

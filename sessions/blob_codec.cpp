#include "sessions/blob_codec.h"

#include <zstd.h>

#include <cstring>

namespace cl::sessions {

std::vector<int64_t> parse_shape(const std::string& shape) {
    std::vector<int64_t> dims;
    if (shape.empty()) return dims;  // a scalar
    size_t i = 0;
    while (i <= shape.size()) {
        const size_t j = shape.find(',', i);
        const std::string part =
            shape.substr(i, j == std::string::npos ? std::string::npos : j - i);
        if (part.empty() || part.size() > 12 ||
            part.find_first_not_of("0123456789") != std::string::npos)
            throw SessionError("bad array shape '" + shape + "'");
        dims.push_back(std::stoll(part));
        if (j == std::string::npos) break;
        i = j + 1;
    }
    if (dims.size() > 8) throw SessionError("array shape '" + shape + "' has too many dimensions");
    return dims;
}

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(shape[i]);
    }
    return s;
}

// One compression and one decompression context per thread, reused: ZSTD_compress and
// ZSTD_decompress set up a fresh context on every call, which costs more than compressing the
// many small arrays of a step record.
struct ZstdContexts {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_DCtx* d = ZSTD_createDCtx();
    ZstdContexts() = default;
    ZstdContexts(const ZstdContexts&) = delete;
    ZstdContexts& operator=(const ZstdContexts&) = delete;
    ~ZstdContexts() {
        ZSTD_freeCCtx(c);
        ZSTD_freeDCtx(d);
    }
};
thread_local ZstdContexts t_zstd;

std::vector<uint8_t> zstd_compress(const uint8_t* data, size_t size, int level) {
    std::vector<uint8_t> out(ZSTD_compressBound(size));
    const size_t n = ZSTD_compressCCtx(t_zstd.c, out.data(), out.size(), data, size, level);
    if (ZSTD_isError(n))
        throw SessionError(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
    out.resize(n);
    return out;
}

std::vector<uint8_t> zstd_decompress(const uint8_t* data, size_t size, size_t expected_size) {
    if (expected_size > kMaxDecodedBytes) throw SessionError("array too large to decode");
    const unsigned long long frame = ZSTD_getFrameContentSize(data, size);
    if (frame == ZSTD_CONTENTSIZE_ERROR) throw SessionError("corrupt blob: not a zstd frame");
    if (frame != ZSTD_CONTENTSIZE_UNKNOWN && frame != expected_size)
        throw SessionError("corrupt blob: zstd frame holds " + std::to_string(frame) +
                           " bytes, expected " + std::to_string(expected_size));
    std::vector<uint8_t> out(expected_size);
    const size_t n = ZSTD_decompressDCtx(t_zstd.d, out.data(), out.size(), data, size);
    if (ZSTD_isError(n)) throw SessionError(std::string("corrupt blob: ") + ZSTD_getErrorName(n));
    if (n != expected_size) throw SessionError("corrupt blob: decompressed size mismatch");
    return out;
}

template <typename T>
EncodedArray encode_array(const std::vector<T>& values, const std::vector<int64_t>& shape,
                          bool compress, int level) {
    EncodedArray a;
    a.dtype = dtype_name<T>();
    a.shape = shape_string(shape);
    const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
    const size_t size = values.size() * sizeof(T);
    if (compress && size >= 64) {
        a.encoding = "zstd";
        a.data = zstd_compress(bytes, size, level);
    } else {
        a.encoding = "raw";
        a.data.assign(bytes, bytes + size);
    }
    return a;
}

template <typename T>
std::vector<T> decode_array(const std::string& dtype, const std::string& shape,
                            const std::string& encoding, const uint8_t* data, size_t size) {
    if (dtype != dtype_name<T>())
        throw SessionError("array dtype '" + dtype + "', expected '" + dtype_name<T>() + "'");
    uint64_t count = 1;
    for (int64_t d : parse_shape(shape)) {
        if (d != 0 && count > kMaxDecodedBytes / static_cast<uint64_t>(d))
            throw SessionError("array shape overflows");
        count *= static_cast<uint64_t>(d);
    }
    const uint64_t bytes = count * sizeof(T);
    if (bytes > kMaxDecodedBytes) throw SessionError("array too large to decode");
    std::vector<T> out(static_cast<size_t>(count));
    if (encoding == "raw") {
        if (size != bytes)
            throw SessionError("corrupt blob: " + std::to_string(size) + " bytes for shape [" +
                               shape + "] of " + dtype);
        if (bytes) std::memcpy(out.data(), data, bytes);
    } else if (encoding == "zstd") {
        auto raw = zstd_decompress(data, size, static_cast<size_t>(bytes));
        if (bytes) std::memcpy(out.data(), raw.data(), bytes);
    } else {
        throw SessionError("unknown blob encoding '" + encoding + "'");
    }
    return out;
}

#define CL_INSTANTIATE(T)                                                                     \
    template EncodedArray encode_array<T>(const std::vector<T>&, const std::vector<int64_t>&, \
                                          bool, int);                                         \
    template std::vector<T> decode_array<T>(const std::string&, const std::string&,           \
                                            const std::string&, const uint8_t*, size_t);
CL_INSTANTIATE(int32_t)
CL_INSTANTIATE(uint8_t)
CL_INSTANTIATE(uint16_t)
CL_INSTANTIATE(float)
CL_INSTANTIATE(double)
#undef CL_INSTANTIATE

}  // namespace cl::sessions

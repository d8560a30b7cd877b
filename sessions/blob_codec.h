// Typed little-endian arrays for session blobs, described by (dtype, shape, encoding) columns so
// that sqlite3, pandas or numpy can read them without CacheLens:
//   dtype    "i32" | "u8" | "u16" | "f32" | "f64"
//   shape    comma-separated dimensions, e.g. "6,320"
//   encoding "raw" | "zstd" (a single zstd frame of the raw bytes)
// Decoding validates everything (unknown names, shape overflow, size mismatch, corrupt frames)
// and throws SessionError; it never trusts the blob.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace cl::sessions {

class SessionError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct EncodedArray {
    std::string dtype;
    std::string shape;
    std::string encoding;
    std::vector<uint8_t> data;
};

// Largest decoded array accepted (guards against decompression bombs).
constexpr size_t kMaxDecodedBytes = 512ull << 20;

// The dtype name of each element type a blob may hold.
template <typename T>
constexpr const char* dtype_name() {
    if constexpr (std::is_same_v<T, int32_t>) return "i32";
    if constexpr (std::is_same_v<T, uint8_t>) return "u8";
    if constexpr (std::is_same_v<T, uint16_t>) return "u16";
    if constexpr (std::is_same_v<T, float>) return "f32";
    if constexpr (std::is_same_v<T, double>) return "f64";
}

template <typename T>
EncodedArray encode_array(const std::vector<T>& values, const std::vector<int64_t>& shape,
                          bool compress, int level = 3);

// Decodes into T, checking that `dtype` matches T exactly.
template <typename T>
std::vector<T> decode_array(const std::string& dtype, const std::string& shape,
                            const std::string& encoding, const uint8_t* data, size_t size);

std::vector<int64_t> parse_shape(const std::string& shape);  // throws SessionError
std::string shape_string(const std::vector<int64_t>& shape);
// Raw byte-level helpers (exposed for the fuzz harness).
std::vector<uint8_t> zstd_compress(const uint8_t* data, size_t size, int level = 3);
std::vector<uint8_t> zstd_decompress(const uint8_t* data, size_t size, size_t expected_size);

}  // namespace cl::sessions

// A reader and writer for the safetensors format (Hugging Face), written for CacheLens.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section. The reader validates everything before handing out a pointer: header
// length, JSON, dtypes, shapes, offsets (in range, non-overlapping, size = numel * element size).
// Torch-free on purpose: sessions, tests and tools can use it without LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cl {

enum class DType : uint8_t { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // safetensors spelling: "F32", "BF16", ...
// Returns false when `name` is not a safetensors dtype.
bool parse_dtype(const std::string& name, DType& out);

struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    size_t offset = 0;  // from the start of the data section
    size_t nbytes = 0;

    int64_t numel() const;
};

// A validated, memory-mapped safetensors file. Pointers stay valid while the object lives.
class SafetensorsFile {
public:
    // Throws InputError naming the file and the problem.
    static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::filesystem::path& path() const { return m_path; }
    const std::vector<TensorInfo>& tensors() const { return m_tensors; }
    const TensorInfo* find(const std::string& name) const;
    const std::byte* data(const TensorInfo& info) const { return m_data + info.offset; }
    const std::map<std::string, std::string>& metadata() const { return m_metadata; }
    size_t file_size() const { return m_size; }

private:
    SafetensorsFile() = default;
    std::filesystem::path m_path;
    void* m_map = nullptr;
    size_t m_size = 0;
    const std::byte* m_data = nullptr;
    std::vector<TensorInfo> m_tensors;
    std::map<std::string, size_t> m_index;
    std::map<std::string, std::string> m_metadata;
};

// One tensor to write: its bytes must be little-endian and numel * dtype_size long.
struct TensorToWrite {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const void* data = nullptr;
    size_t nbytes = 0;
};

// Writes atomically (temporary file + rename), tensors in the given order, 8-byte aligned header.
// Throws RuntimeFailure on I/O errors and InputError on inconsistent sizes.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Conversions used by the loader and writer (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace cl

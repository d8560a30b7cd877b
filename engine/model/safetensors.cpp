#include "engine/model/safetensors.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/base/errors.h"

namespace cl {

// The compiler's macro rather than C++20's std::endian: clang-tidy reads this unit as C++17
// (scripts/tidy_units.py).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "CacheLens assumes a little-endian host");

size_t dtype_size(DType d) {
    switch (d) {
        case DType::F64:
        case DType::I64:
            return 8;
        case DType::F32:
        case DType::I32:
            return 4;
        case DType::F16:
        case DType::BF16:
        case DType::I16:
            return 2;
        case DType::I8:
        case DType::U8:
        case DType::Bool:
            return 1;
    }
    return 0;
}

const char* dtype_name(DType d) {
    switch (d) {
        case DType::F32:
            return "F32";
        case DType::F16:
            return "F16";
        case DType::BF16:
            return "BF16";
        case DType::F64:
            return "F64";
        case DType::I64:
            return "I64";
        case DType::I32:
            return "I32";
        case DType::I16:
            return "I16";
        case DType::I8:
            return "I8";
        case DType::U8:
            return "U8";
        case DType::Bool:
            return "BOOL";
    }
    return "?";
}

bool parse_dtype(const std::string& name, DType& out) {
    static const std::pair<const char*, DType> table[] = {
        {"F32", DType::F32}, {"F16", DType::F16},  {"BF16", DType::BF16}, {"F64", DType::F64},
        {"I64", DType::I64}, {"I32", DType::I32},  {"I16", DType::I16},   {"I8", DType::I8},
        {"U8", DType::U8},   {"BOOL", DType::Bool}};
    for (const auto& [n, d] : table)
        if (name == n) {
            out = d;
            return true;
        }
    return false;
}

int64_t TensorInfo::numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

namespace {

// Largest header we accept: real checkpoints with thousands of tensors stay far below this.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
    std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
    f->m_path = path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw InputError(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw InputError(path, "not a regular file");
    }
    f->m_size = static_cast<size_t>(st.st_size);
    if (f->m_size < 8) {
        ::close(fd);
        throw InputError(path,
                         "truncated safetensors file (shorter than the 8-byte header length)");
    }
    void* map = ::mmap(nullptr, f->m_size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED)
        throw InputError(path, std::string("cannot map: ") + std::strerror(errno));
    f->m_map = map;
    const auto* bytes = static_cast<const std::byte*>(map);

    uint64_t header_len = 0;
    std::memcpy(&header_len, bytes, 8);
    if (header_len == 0 || header_len > kMaxHeaderBytes || header_len > f->m_size - 8)
        throw InputError(path, "bad header length " + std::to_string(header_len) +
                                   " for a file of " + std::to_string(f->m_size) + " bytes");
    const char* header = reinterpret_cast<const char*>(bytes + 8);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(header, header + header_len);
    } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number like 8e3172
        throw InputError(path, std::string("header is not valid JSON: ") + e.what());
    }
    if (!j.is_object()) throw InputError(path, "header is not a JSON object");
    f->m_data = bytes + 8 + header_len;
    const size_t data_size = f->m_size - 8 - header_len;

    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") {
            if (!it->is_object()) throw InputError(path, "__metadata__ is not an object");
            for (auto m = it->begin(); m != it->end(); ++m)
                if (m->is_string()) f->m_metadata[m.key()] = m->get<std::string>();
            continue;
        }
        const auto& e = it.value();
        if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
            !e.contains("data_offsets"))
            throw InputError(path, "tensor '" + name + "' lacks dtype, shape or data_offsets");
        TensorInfo info;
        info.name = name;
        if (!e["dtype"].is_string() || !parse_dtype(e["dtype"].get<std::string>(), info.dtype))
            throw InputError(path, "tensor '" + name + "' has an unknown dtype");
        if (!e["shape"].is_array())
            throw InputError(path, "tensor '" + name + "' shape is not a list");
        uint64_t numel = 1;
        for (const auto& s : e["shape"]) {
            if (!s.is_number_integer() || s.get<int64_t>() < 0)
                throw InputError(path,
                                 "tensor '" + name + "' has a negative or non-integer dimension");
            const auto dim = s.get<int64_t>();
            info.shape.push_back(dim);
            if (dim != 0 && numel > (1ull << 62) / static_cast<uint64_t>(dim))
                throw InputError(path, "tensor '" + name + "' shape overflows");
            numel *= static_cast<uint64_t>(dim);
        }
        const auto& off = e["data_offsets"];
        if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
            !off[1].is_number_unsigned())
            throw InputError(path,
                             "tensor '" + name + "' data_offsets must be two unsigned integers");
        const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
        if (begin > end || end > data_size)
            throw InputError(path, "tensor '" + name + "' data_offsets [" + std::to_string(begin) +
                                       ", " + std::to_string(end) +
                                       ") fall outside the data section of " +
                                       std::to_string(data_size) + " bytes");
        if (end - begin != numel * dtype_size(info.dtype))
            throw InputError(path, "tensor '" + name + "' byte size " +
                                       std::to_string(end - begin) +
                                       " does not match its shape and dtype");
        info.offset = begin;
        info.nbytes = end - begin;
        f->m_tensors.push_back(std::move(info));
    }
    // Offsets must not overlap; sorting by offset makes the check linear.
    std::vector<const TensorInfo*> sorted;
    for (const auto& t : f->m_tensors) sorted.push_back(&t);
    std::sort(sorted.begin(), sorted.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < sorted.size(); ++i)
        if (sorted[i]->offset < sorted[i - 1]->offset + sorted[i - 1]->nbytes)
            throw InputError(path, "tensors '" + sorted[i - 1]->name + "' and '" + sorted[i]->name +
                                       "' overlap");
    for (size_t i = 0; i < f->m_tensors.size(); ++i) f->m_index[f->m_tensors[i].name] = i;
    return f;
}

SafetensorsFile::~SafetensorsFile() {
    if (m_map) ::munmap(m_map, m_size);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
    auto it = m_index.find(name);
    return it == m_index.end() ? nullptr : &m_tensors[it->second];
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    size_t offset = 0;
    for (const auto& t : tensors) {
        int64_t numel = 1;
        for (int64_t s : t.shape) numel *= s;
        if (static_cast<size_t>(numel) * dtype_size(t.dtype) != t.nbytes)
            throw InputError(path, "tensor '" + t.name + "' byte size does not match its shape");
        header[t.name] = {{"dtype", dtype_name(t.dtype)},
                          {"shape", t.shape},
                          {"data_offsets", {offset, offset + t.nbytes}}};
        offset += t.nbytes;
    }
    std::string text = header.dump();
    // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
    while ((8 + text.size()) % 8 != 0) text.push_back(' ');
    const auto tmp = path.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw RuntimeFailure(tmp + ": cannot open for writing");
        const uint64_t len = text.size();
        out.write(reinterpret_cast<const char*>(&len), 8);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        for (const auto& t : tensors)
            out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.nbytes));
        out.flush();
        if (!out) throw RuntimeFailure(tmp + ": write failed (disk full?)");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw RuntimeFailure(path.string() + ": cannot rename into place: " + ec.message());
}

// IEEE binary16 and bfloat16 through c10's types (round to nearest even, as PyTorch writes them).
float half_to_float(uint16_t h) {
    return static_cast<float>(c10::Half(h, c10::Half::from_bits()));
}

uint16_t float_to_half(float f) {
    return c10::Half(f).x;
}

float bf16_to_float(uint16_t b) {
    return static_cast<float>(c10::BFloat16(b, c10::BFloat16::from_bits()));
}

uint16_t float_to_bf16(float f) {
    return c10::BFloat16(f).x;
}

}  // namespace cl

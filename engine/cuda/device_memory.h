// Plain device memory for the kernels' tests and benchmarks (the engine's own tensors are
// LibTorch's): a typed owning buffer over cudaMalloc, with copies from and to host vectors; and
// waiting for the device or one stream.
// In a build without CUDA every call throws std::runtime_error.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "engine/cuda/stream.h"

namespace cl::cuda {

void* device_alloc(size_t bytes);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void synchronize();               // waits for the device; reports a fault of an earlier kernel
void synchronize(Stream stream);  // waits for the work queued on one stream (of any device)

template <typename T>
class DeviceArray {
public:
    explicit DeviceArray(const std::vector<T>& host)
        : m_size(host.size()), m_data(static_cast<T*>(device_alloc(bytes())), &device_free) {
        copy_to_device(m_data.get(), host.data(), bytes());
    }
    explicit DeviceArray(size_t n)
        : m_size(n), m_data(static_cast<T*>(device_alloc(bytes())), &device_free) {}
    T* get() const { return m_data.get(); }
    std::vector<T> to_host() const {
        synchronize();
        std::vector<T> out(m_size);
        copy_to_host(out.data(), m_data.get(), bytes());
        return out;
    }

private:
    size_t bytes() const { return (m_size == 0 ? 1 : m_size) * sizeof(T); }
    size_t m_size;
    std::unique_ptr<T, void (*)(void*)> m_data;
};

}  // namespace cl::cuda

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_memory.h"

namespace cl::cuda {

void* device_alloc(size_t bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
}

void device_free(void* p) {
    cudaFree(p);
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to the device");
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to the host");
}

void synchronize() {
    check(cudaDeviceSynchronize(), "a kernel");
}

void synchronize(Stream stream) {
    check(cudaStreamSynchronize(native(stream)), "work on a stream");
}

}  // namespace cl::cuda

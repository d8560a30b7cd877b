// The build without the CUDA toolkit: no device is listed, the reason says why, and device memory
// and events cannot be had.
#include <stdexcept>

#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_query.h"
#include "engine/cuda/event_timeline.h"

namespace cl::cuda {
namespace {
[[noreturn]] void no_cuda() {
    throw std::runtime_error(list_devices().why_none);
}
}  // namespace

DeviceList list_devices() {
    return {{}, "this build has no CUDA (no CUDA toolkit was found when it was configured)"};
}

bool kernels_built() {
    return false;
}

void* device_alloc(size_t) {
    no_cuda();
}
void device_free(void*) {}
void copy_to_device(void*, const void*, size_t) {
    no_cuda();
}
void copy_to_host(void*, const void*, size_t) {
    no_cuda();
}
void synchronize() {
    no_cuda();
}
void synchronize(Stream) {
    no_cuda();
}

// Never constructed without CUDA (the constructor throws), so the other members have nothing to do.
struct EventTimeline::Impl {};
EventTimeline::EventTimeline(int) {
    no_cuda();
}
EventTimeline::~EventTimeline() = default;
void EventTimeline::clear() {}
int EventTimeline::mark(Stream) {
    no_cuda();
}
float EventTimeline::elapsed_ms(int, int) const {
    no_cuda();
}

}  // namespace cl::cuda

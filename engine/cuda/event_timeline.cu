#include <vector>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/event_timeline.h"

namespace cl::cuda {

struct EventTimeline::Impl {
    int device = 0;
    std::vector<cudaEvent_t> events;  // created on `device`, reused across timelines
    int used = 0;
};

namespace {
// Runs `f` with `device` current, restoring the caller's device (LibTorch's guard expects it).
template <typename F>
void on_device(int device, F&& f) {
    int before = 0;
    check(cudaGetDevice(&before), "cudaGetDevice");
    if (before != device) check(cudaSetDevice(device), "cudaSetDevice");
    f();
    if (before != device) check(cudaSetDevice(before), "cudaSetDevice");
}
}  // namespace

EventTimeline::EventTimeline(int device) : m_impl(std::make_unique<Impl>()) {
    m_impl->device = device;
}

EventTimeline::~EventTimeline() {
    for (cudaEvent_t e : m_impl->events) cudaEventDestroy(e);
}

void EventTimeline::clear() {
    m_impl->used = 0;
}

int EventTimeline::mark(Stream stream) {
    auto& m = *m_impl;
    if (m.used == static_cast<int>(m.events.size())) {
        cudaEvent_t e = nullptr;
        on_device(m.device, [&] { check(cudaEventCreate(&e), "cudaEventCreate"); });
        m.events.push_back(e);
    }
    const int index = m.used++;
    check(cudaEventRecord(m.events[static_cast<size_t>(index)], native(stream)), "cudaEventRecord");
    return index;
}

float EventTimeline::elapsed_ms(int from, int to) const {
    const auto& m = *m_impl;
    if (from < 0 || to < 0 || from >= m.used || to >= m.used)
        throw std::out_of_range("EventTimeline::elapsed_ms: no such mark");
    const cudaEvent_t a = m.events[static_cast<size_t>(from)];
    const cudaEvent_t b = m.events[static_cast<size_t>(to)];
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return ms;
}

}  // namespace cl::cuda

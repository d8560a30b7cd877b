// The build without the CUDA toolkit: no device is listed, the reason says why, and device memory,
// events and kernel launches throw (nothing calls them there: no tensor is ever on a CUDA device
// and kernels_built() is false), so that everything linking cl_cuda builds the same either way.
#include <stdexcept>

#include "engine/cuda/attention_quant.h"
#include "engine/cuda/certainty_density.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_query.h"
#include "engine/cuda/elastic_drift.h"
#include "engine/cuda/event_timeline.h"
#include "engine/cuda/ranking.h"

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

void head_mean_quantize(const float*, int32_t, int32_t, int32_t, uint8_t*, float*, Stream) {
    no_cuda();
}
void certainty_density(const uint8_t*, int64_t, DensityRange, double*, Stream) {
    no_cuda();
}
void window_head_mean(const float*, ProbsShape, const int32_t*, int64_t, double*, Stream) {
    no_cuda();
}
void window_column_sums(const float*, ProbsShape, int64_t, const int32_t*, int64_t, const uint8_t*,
                        double*, Stream) {
    no_cuda();
}
void drift_sums(const float*, ProbsShape, const int32_t*, int64_t, const double*, const int64_t*,
                int64_t, double*, int32_t*, Stream) {
    no_cuda();
}
void select_top_k(const double*, const uint8_t*, int64_t, TopKRule, uint8_t*, int32_t*, Stream) {
    no_cuda();
}

}  // namespace cl::cuda

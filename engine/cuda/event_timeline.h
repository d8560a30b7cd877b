// Device-side timing: events recorded on a stream between pieces of work, read once the device has
// passed them. A GPU step's per-layer times come from here without waiting for the device in the
// middle of the step (a host clock around a layer would measure only how long its launches took).
// In a build without CUDA, constructing one throws std::runtime_error.
#pragma once

#include <memory>

#include "engine/cuda/stream.h"

namespace cl::cuda {

class EventTimeline {
public:
    explicit EventTimeline(int device);  // the CUDA device whose streams it marks
    ~EventTimeline();
    EventTimeline(const EventTimeline&) = delete;
    EventTimeline& operator=(const EventTimeline&) = delete;

    void clear();             // a new timeline; the events are reused
    int mark(Stream stream);  // records an event after the work queued so far; its index
    // Milliseconds from mark `from` to mark `to` as the device ran them; waits for `to`.
    float elapsed_ms(int from, int to) const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace cl::cuda

// TraceWorker: one helper thread that runs the engine's optional trace work (quantising attention
// maps) while the engine thread computes the next layer. The engine submits jobs during a step
// and waits for all of them before it publishes the step's record, so records stay complete and
// immutable; with a spare core the trace leaves the critical path.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace cl::detail {

class TraceWorker {
public:
    TraceWorker();
    ~TraceWorker();  // finishes queued jobs, then joins
    TraceWorker(const TraceWorker&) = delete;
    TraceWorker& operator=(const TraceWorker&) = delete;

    void submit(std::function<void()> job);
    // Blocks until every submitted job has run; rethrows the first exception a job threw.
    void wait();

private:
    void loop();

    std::mutex m_mutex;
    std::condition_variable m_work, m_idle;
    std::deque<std::function<void()>> m_jobs;
    size_t m_running = 0;
    bool m_stop = false;
    std::exception_ptr m_error;
    std::thread m_thread;  // last: starts after the members above exist
};

}  // namespace cl::detail

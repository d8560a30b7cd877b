#include "engine/trace/trace_worker.h"

namespace cl::detail {

TraceWorker::TraceWorker() : m_thread([this] { loop(); }) {}

TraceWorker::~TraceWorker() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
    }
    m_work.notify_all();
    m_thread.join();
}

void TraceWorker::submit(std::function<void()> job) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_jobs.push_back(std::move(job));
    }
    m_work.notify_one();
}

void TraceWorker::wait() {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_idle.wait(lock, [this] { return m_jobs.empty() && m_running == 0; });
    if (m_error) {
        auto e = m_error;
        m_error = nullptr;
        std::rethrow_exception(e);
    }
}

void TraceWorker::loop() {
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
        m_work.wait(lock, [this] { return m_stop || !m_jobs.empty(); });
        if (m_jobs.empty()) return;  // stopping with nothing left to do
        auto job = std::move(m_jobs.front());
        m_jobs.pop_front();
        ++m_running;
        lock.unlock();
        std::exception_ptr error;
        try {
            job();
        } catch (...) {
            error = std::current_exception();
        }
        job = nullptr;  // release what the job held (tensors) outside the lock
        lock.lock();
        if (error && !m_error) m_error = error;
        --m_running;
        if (m_jobs.empty() && m_running == 0) m_idle.notify_all();
    }
}

}  // namespace cl::detail

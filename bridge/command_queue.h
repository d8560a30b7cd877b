// CommandQueue: the UI -> engine channel (RenderDoc's tag-coalescing AsyncInvoke). A command with
// a non-empty tag replaces a queued command with the same tag (a slider dragged across 50 values
// re-runs once, with the last value). Any thread may post; one consumer pops.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace cl::app {

struct Command {
    std::string tag;  // "" = never coalesced
    std::function<void()> run;
};

class CommandQueue {
public:
    void post(Command c) {
        {
            std::lock_guard lock(m_mutex);
            if (!c.tag.empty())
                for (auto& queued : m_queue)
                    if (queued.tag == c.tag) {
                        queued = std::move(c);  // keep the queue position, take the newest payload
                        m_cv.notify_one();
                        return;
                    }
            m_queue.push_back(std::move(c));
        }
        m_cv.notify_one();
    }
    // Waits up to `timeout` for a command.
    std::optional<Command> pop(std::chrono::milliseconds timeout) {
        std::unique_lock lock(m_mutex);
        if (!m_cv.wait_for(lock, timeout, [&] { return !m_queue.empty(); })) return std::nullopt;
        Command c = std::move(m_queue.front());
        m_queue.pop_front();
        return c;
    }
    size_t size() const {
        std::lock_guard lock(m_mutex);
        return m_queue.size();
    }

private:
    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<Command> m_queue;
};

}  // namespace cl::app

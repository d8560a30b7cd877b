// LibTorch's pool at n threads for a scope, the count before restored after (also when an ASSERT
// leaves the test early), so that one test's threads never reach the next.
#pragma once

#include <ATen/Parallel.h>

namespace cl::test {

class ScopedThreads {
public:
    explicit ScopedThreads(int n) : m_before(at::get_num_threads()) { at::set_num_threads(n); }
    ~ScopedThreads() { at::set_num_threads(m_before); }
    ScopedThreads(const ScopedThreads&) = delete;
    ScopedThreads& operator=(const ScopedThreads&) = delete;

private:
    int m_before;
};

}  // namespace cl::test

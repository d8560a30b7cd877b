// A kernel set (engine/kernels/kernel_choice.h) for a scope, the set before restored after: the
// kernel suites hold the fast kernels against the reference whatever CACHELENS_KERNELS the whole
// suite runs at.
#pragma once

#include "engine/kernels/kernel_choice.h"

namespace cl::test {

class ScopedKernelSet {
public:
    explicit ScopedKernelSet(KernelSet set) : m_before(kernel_set()) { set_kernel_set(set); }
    ~ScopedKernelSet() { set_kernel_set(m_before); }
    ScopedKernelSet(const ScopedKernelSet&) = delete;
    ScopedKernelSet& operator=(const ScopedKernelSet&) = delete;

private:
    KernelSet m_before;
};

}  // namespace cl::test

#include "engine/kernels/kernel_choice.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "engine/base/errors.h"

namespace cl {

namespace {

// -1: not chosen yet (the environment decides at first use); else a KernelSet.
std::atomic<int> g_chosen{-1};

KernelSet from_environment() {
    const char* value = std::getenv(kKernelsEnvironment);
    if (value == nullptr || *value == '\0') return KernelSet::Fast;
    if (const auto set = kernel_set_named(value)) return *set;
    throw InputError(std::string(kKernelsEnvironment) + ": '" + value +
                     "' is not a kernel set (expected fast or reference)");
}

}  // namespace

KernelSet kernel_set() {
    const int chosen = g_chosen.load(std::memory_order_relaxed);
    if (chosen >= 0) return static_cast<KernelSet>(chosen);
    const KernelSet set = from_environment();
    int expected = -1;
    // A set chosen meanwhile (set_kernel_set) wins over the environment.
    if (!g_chosen.compare_exchange_strong(expected, static_cast<int>(set)))
        return static_cast<KernelSet>(expected);
    return set;
}

void set_kernel_set(KernelSet set) {
    g_chosen.store(static_cast<int>(set), std::memory_order_relaxed);
}

bool fast_kernels() {
    return kernel_set() == KernelSet::Fast;
}

const char* kernel_set_name(KernelSet set) {
    return set == KernelSet::Reference ? "reference" : "fast";
}

std::optional<KernelSet> kernel_set_named(std::string_view name) {
    if (name == "fast") return KernelSet::Fast;
    if (name == "reference") return KernelSet::Reference;
    return std::nullopt;
}

KernelSet parse_kernel_set(std::string_view name) {
    if (const auto set = kernel_set_named(name)) return *set;
    throw InputError(Setting{"kernels"}, "'" + std::string(name) +
                                             "' is not a kernel set (expected fast or reference)");
}

}  // namespace cl

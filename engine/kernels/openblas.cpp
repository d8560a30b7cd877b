#include "engine/kernels/openblas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace cl {
namespace {

// OpenBLAS's fallback kernels for an x86-64 CPU it does not know (driver/others/dynamic.c).
constexpr const char* kFallbackKernels = "Prescott";

// OpenBLAS's own function `name`, or nullptr where the loaded BLAS is not OpenBLAS.
template <class Fn>
Fn openblas_function(const char* name) {
    return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

const char* blas_threading() {
    // OpenBLAS says how it was built (openblas_get_parallel: 0 sequential, 1 pthreads, 2 OpenMP).
    using GetParallel = int (*)();
    const auto fn = openblas_function<GetParallel>("openblas_get_parallel");
    if (!fn) return "not OpenBLAS";
    switch (fn()) {
        case 0:
            return "sequential";
        case 1:
            return "pthreads";
        case 2:
            return "openmp";
        default:
            return "unknown";
    }
}

void set_blas_threads(int threads) {
    using SetThreads = void (*)(int);
    if (const auto fn = openblas_function<SetThreads>("openblas_set_num_threads")) fn(threads);
}

std::string blas_kernels() {
    using CoreName = char* (*)();
    const auto fn = openblas_function<CoreName>("openblas_get_corename");
    const char* name = fn ? fn() : nullptr;
    return name ? name : "";
}

std::string best_blas_kernels_for_this_cpu() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return "";
}

void choose_blas_kernels() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (std::getenv("OPENBLAS_CORETYPE")) return;    // the user's choice stands
        if (blas_kernels() != kFallbackKernels) return;  // OpenBLAS knew this CPU, or no OpenBLAS
        const std::string best = best_blas_kernels_for_this_cpu();
        using Hook = void (*)();
        const auto quit = openblas_function<Hook>("gotoblas_dynamic_quit");
        const auto init = openblas_function<Hook>("gotoblas_dynamic_init");
        if (best.empty() || !quit || !init) return;
        // dynamic_init reads OPENBLAS_CORETYPE and keeps its choice until dynamic_quit forgets
        // it; every product reads the kernels and their block sizes through that choice, so it
        // takes effect from the next call. The variable stays set: child processes start with
        // the same kernels.
        setenv("OPENBLAS_CORETYPE", best.c_str(), /*overwrite=*/0);
        quit();
        init();
    });
}

}  // namespace cl

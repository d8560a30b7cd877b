// How the CPU loop kernels get the wide vectors of the machine they run on while the build targets
// baseline x86-64 (SSE2), so that one binary runs anywhere. Two ways, GCC and Clang on x86-64
// (elsewhere the plain code):
//
// CL_CPU_CLONES before a loop function whose vectors the compiler picks (auto-vectorised loops,
// vectors of a fixed size with few live at once): one copy per instruction set (AVX-512, AVX2,
// the baseline), picked when the library loads. A clone built without AVX-512 cannot pass a 64-byte
// vector to another function (Clang refuses, GCC warns: -Wno-psabi), so such vectors stay inside
// always-inlined helpers.
//
// run_at_vector_width<Kernel>(args...) for a kernel whose shape depends on the register width: a
// register-tiled product keeps 12 vectors of sums live, which fits AVX-512's 32 registers at 16
// floats each, AVX2's 16 at 8 and SSE2's 16 at 4, but not 16-float vectors on AVX2 (24 registers:
// every sum spilled; the AVX2 clone of such a kernel ran a full forward at 1.6 GFLOP/s against
// about 90 on AVX-512, measured on an AMD EPYC without AVX-512). Kernel::run<N> is an
// always-inlined template on the floats per vector N, instantiated once per instruction set inside
// a function built for it.
#pragma once

#include <atomic>
#include <utility>

namespace cl::cpu {

namespace detail {
// The cap set by limit_vector_floats (0: none). Inline: one variable across the libraries.
inline std::atomic<int> vector_floats_cap{0};

inline int detected_vector_floats() {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
                      __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
                      __builtin_cpu_supports("bmi2");
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return 16;
    if (avx2) return 8;
#endif
    return 4;
}
}  // namespace detail

// Floats per vector of the widest instruction set this CPU has and the kernels use: 16 (AVX-512:
// F, BW, DQ, VL), 8 (AVX2 with FMA) or 4 (the SSE2 baseline, and every other architecture), never
// capped: layouts packed once at load (row_gemm's weight panels) follow it, so that every
// narrower kernel a test picks still reads them.
inline int widest_vector_floats() {
    static const int detected = detail::detected_vector_floats();
    return detected;
}

// The floats per vector the kernels run at: widest_vector_floats() capped by limit_vector_floats.
inline int vector_floats() {
    const int detected = widest_vector_floats();
    const int cap = detail::vector_floats_cap.load(std::memory_order_relaxed);
    return cap > 0 && cap < detected ? cap : detected;
}

// The instruction set of vector_floats(), for benchmark reports: "AVX-512", "AVX2" or "SSE2"
// ("scalar+autovec" off x86-64).
inline const char* vector_isa() {
#if defined(__x86_64__)
    switch (vector_floats()) {
        case 16:
            return "AVX-512";
        case 8:
            return "AVX2";
        default:
            return "SSE2";
    }
#else
    return "scalar+autovec";
#endif
}

// Caps vector_floats() at `floats` (8 or 4; 0 lifts the cap), so that tests run every narrower
// kernel on a wide machine. Only between kernel calls: tests and benchmarks.
inline void limit_vector_floats(int floats) {
    detail::vector_floats_cap.store(floats == 8 || floats == 4 ? floats : 0,
                                    std::memory_order_relaxed);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define CL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace detail {
template <class Kernel, class... Args>
__attribute__((target("arch=x86-64-v4"))) void run_avx512(Args&&... args) {
    Kernel::template run<16>(std::forward<Args>(args)...);
}
template <class Kernel, class... Args>
__attribute__((target("arch=x86-64-v3"))) void run_avx2(Args&&... args) {
    Kernel::template run<8>(std::forward<Args>(args)...);
}
}  // namespace detail

template <class Kernel, class... Args>
void run_at_vector_width(Args&&... args) {
    switch (vector_floats()) {
        case 16:
            return detail::run_avx512<Kernel>(std::forward<Args>(args)...);
        case 8:
            return detail::run_avx2<Kernel>(std::forward<Args>(args)...);
        default:
            return Kernel::template run<4>(std::forward<Args>(args)...);
    }
}
#else
#define CL_CPU_CLONES

template <class Kernel, class... Args>
void run_at_vector_width(Args&&... args) {
    Kernel::template run<4>(std::forward<Args>(args)...);
}
#endif

}  // namespace cl::cpu

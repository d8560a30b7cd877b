// The float vector types of the CPU row kernels (row_gemm.cpp, row_attention.cpp): Floats<N>, N
// floats, where a kernel's N is the floats per register of the instruction set it was built for
// (cpu_clones.h, run_at_vector_width: 16 on AVX-512, 8 on AVX2, 4 on SSE2), and Floats<N / 2> for
// the last columns of a tile row that are not a whole vector (a cached step's 17-24 query columns
// on AVX-512: a second 16-float vector would be half padding). Included only by those kernel
// units (their 32- and 64-byte vectors stay inside always-inlined helpers: -Wno-psabi).
#pragma once

#include <cstdint>

namespace cl::detail::row_lanes {

template <int N>
struct FloatVector {
    typedef float type __attribute__((vector_size(N * sizeof(float))));
};
template <int N>
using Floats = typename FloatVector<N>::type;

// Floats in a vector of type V.
template <class V>
inline constexpr int lanes_of = static_cast<int>(sizeof(V) / sizeof(float));

template <class V>
[[gnu::always_inline]] inline V load(const float* p) {
    V v;
    __builtin_memcpy(&v, p, sizeof v);  // unaligned
    return v;
}

template <class V>
[[gnu::always_inline]] inline void store(float* p, V v) {
    __builtin_memcpy(p, &v, sizeof v);
}

}  // namespace cl::detail::row_lanes

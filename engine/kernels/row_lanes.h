// The float vector types of the CPU row kernels (row_gemm.cpp, row_attention.cpp,
// policies/row_similarity.cpp): Floats<N>, N
// floats, where a kernel's N is the floats per register of the instruction set it was built for
// (cpu_clones.h, run_at_vector_width: 16 on AVX-512, 8 on AVX2, 4 on SSE2), and Floats<N / 2> for
// the last columns of a tile row that are not a whole vector (a cached step's 17-24 query columns
// on AVX-512: a second 16-float vector would be half padding). Included only by those kernel
// units (their 32- and 64-byte vectors stay inside always-inlined helpers: -Wno-psabi).
#pragma once

#include <cstdint>

namespace cl::detail::row_lanes {

// N values of type T in one vector.
template <class T, int N>
struct Vector {
    typedef T type __attribute__((vector_size(N * sizeof(T))));
};
template <int N>
using Floats = typename Vector<float, N>::type;
template <int D>
using Doubles = typename Vector<double, D>::type;

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

// D floats widened to doubles, D <= 8 (8 only in code built for AVX-512). GCC 12 lowers the
// conversion of 8 floats into two conversions of 4, a lane extract and a lane insert (perf annotate
// of the head mean: 4 instructions where the AVX-512 one does it), so on x86 GCC the 8-lane case is
// written as that one instruction.
template <int D>
[[gnu::always_inline]] inline Doubles<D> to_doubles(Floats<D> f) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    if constexpr (D == 8) {
        Doubles<D> d;
        asm("vcvtps2pd %1, %0" : "=v"(d) : "v"(f));
        return d;
    }
#endif
    return __builtin_convertvector(f, Doubles<D>);
}

}  // namespace cl::detail::row_lanes

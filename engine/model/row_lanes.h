// The float vector types of the CPU row kernels (row_gemm.cpp, row_attention.cpp): Lanes, 16
// floats (one AVX-512 register, two AVX2 ones, four SSE2 ones, whichever target clone runs), and
// HalfLanes, 8 floats, for the last columns of a tile row that are not a whole Lanes (a cached
// step's 17-24 query columns: a second 16-float vector would be half padding). Included only by
// those kernel units (their 32- and 64-byte vectors stay inside always-inlined helpers:
// -Wno-psabi).
#pragma once

#include <cstdint>

namespace cl::detail::row_lanes {

inline constexpr int kLanes = 16;
inline constexpr int kHalfLanes = 8;
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
using HalfLanes = float __attribute__((vector_size(kHalfLanes * sizeof(float))));

// Floats in a vector of type V.
template <class V>
inline constexpr int lanes_of = static_cast<int>(sizeof(V) / sizeof(float));

template <class V = Lanes>
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

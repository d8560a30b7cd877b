// The 16-float vector type of the CPU row kernels (row_gemm.cpp, row_attention.cpp): one AVX-512
// register, two AVX2 ones, four SSE2 ones, whichever target clone runs. Included only by those
// kernel units (their 64-byte vectors stay inside always-inlined helpers: -Wno-psabi).
#pragma once

#include <cstdint>

namespace cl::detail::row_lanes {

inline constexpr int kLanes = 16;
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));

[[gnu::always_inline]] inline Lanes load(const float* p) {
    Lanes v;
    __builtin_memcpy(&v, p, sizeof v);  // unaligned
    return v;
}

[[gnu::always_inline]] inline void store(float* p, Lanes v) {
    __builtin_memcpy(p, &v, sizeof v);
}

}  // namespace cl::detail::row_lanes

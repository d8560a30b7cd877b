// CL_CPU_CLONES before a CPU loop function: one copy per instruction set (AVX-512, AVX2, the
// baseline), picked when the library loads. The build targets baseline x86-64 (SSE2) so that one
// binary runs anywhere; the row kernels, the sampler's row pass and the rollout's head means get
// the wide vectors of the machine they run on this way. GCC and Clang on x86-64; elsewhere the
// plain copy. A clone built without AVX-512 cannot pass a 64-byte vector to another function
// (Clang refuses, GCC warns: -Wno-psabi), so such vectors stay inside always-inlined helpers.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define CL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CL_CPU_CLONES
#endif

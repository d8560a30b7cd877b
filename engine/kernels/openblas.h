// The loaded OpenBLAS, asked and set at run time through its own symbols (the alternatives system
// picks the BLAS when the program starts; PyPI's LibTorch links MKL in, which has none of them):
// how it runs in parallel, its thread count, and which of its kernel sets it runs.
//
// The kernel set: a DYNAMIC_ARCH OpenBLAS (Debian's) picks one by CPU model when it loads, and on
// a model it does not know falls back to its oldest x86-64 set, Prescott (SSE3): Debian 12's
// 0.3.21 does so on Intel's Emerald Rapids (family 6, model 207), where its float32 products then
// run at a fraction of the SkylakeX kernels' rate (`cachelens-cli bench` prints the set in use).
// LibTorch's products outside the row kernels' shapes (a real model's d_model of 1024 or more) go
// to OpenBLAS.
#pragma once

#include <string>

namespace cl {

// How the loaded BLAS runs in parallel: "openmp", "pthreads", "sequential" (OpenBLAS builds) or
// "not OpenBLAS" (PyPI's LibTorch, whose MKL is linked in).
const char* blas_threading();

// OpenBLAS's thread count (nothing where the BLAS is not OpenBLAS).
void set_blas_threads(int threads);

// The kernel set the loaded OpenBLAS runs ("SkylakeX", "Haswell", "Prescott", ...), or "" where
// the BLAS is not OpenBLAS.
std::string blas_kernels();

// The kernel set this CPU's instructions allow ("SkylakeX" with AVX-512 F/CD/BW/DQ/VL, "Haswell"
// with AVX2 and FMA), or "" where the fallback is all it has (or not x86-64).
std::string best_blas_kernels_for_this_cpu();

// Where OpenBLAS fell back to Prescott on a CPU that runs a better set, and the user has not named
// one (OPENBLAS_CORETYPE), OpenBLAS chooses again with that set named: its own start-up choice
// (gotoblas_dynamic_init), asked again before any product. Idempotent; set_thread_count calls it.
// It may set OPENBLAS_CORETYPE (setenv), so a program with threads of its own (the desktop app's
// Qt) calls it before they start.
void choose_blas_kernels();

}  // namespace cl

// Which of OpenBLAS's kernel sets the process runs. A DYNAMIC_ARCH OpenBLAS (Debian's) picks one
// by CPU model when it loads, and on a model it does not know falls back to its oldest x86-64 set,
// Prescott (SSE3): Debian 12's 0.3.21 does so on Intel's Emerald Rapids (family 6, model 207),
// where its float32 products then ran at a fraction of the SkylakeX kernels' rate (README, #17,
// "OpenBLAS on CPUs it does not know"). LibTorch's products outside the row kernels' shapes (a
// real model's d_model of 1024 or more, the inner sizes above 512) go to OpenBLAS.
#pragma once

#include <string>

namespace cl {

// The kernel set the loaded OpenBLAS runs ("SkylakeX", "Haswell", "Prescott", ...), or "" where
// the BLAS is not OpenBLAS (PyPI's LibTorch links MKL in).
std::string blas_kernels();

// The kernel set this CPU's instructions allow ("SkylakeX" with AVX-512 F/CD/BW/DQ/VL, "Haswell"
// with AVX2 and FMA), or "" where the fallback is all it has (or not x86-64).
std::string best_blas_kernels_for_this_cpu();

// Where OpenBLAS fell back to Prescott on a CPU that runs a better set, and the user has not named
// one (OPENBLAS_CORETYPE), OpenBLAS chooses again with that set named: its own start-up choice
// (gotoblas_dynamic_init), asked again before any product. Idempotent; set_thread_count calls it.
// Returns the kernel set in use afterwards (blas_kernels()). It may set OPENBLAS_CORETYPE
// (setenv), so a program with threads of its own (the desktop app's Qt) calls it before they start.
std::string choose_blas_kernels();

}  // namespace cl

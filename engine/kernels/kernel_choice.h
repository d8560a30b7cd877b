// Which implementation runs the ops of a step, for the whole process: the one switch between the
// fast paths and the plain reference they are tested against.
//
//   fast       the CPU row kernels (row_*.h), the fused few-rows layers (few_rows_layer.h), the
//              row loops that copy and gather rows, the sampler's row pass, the column attention,
//              and the CUDA kernels of the policies on a GPU;
//   reference  every op of every step as plain LibTorch ops, and each CUDA kernel's CPU
//              reference: no row kernel anywhere.
//
// Both give the same tokens on the golden runs and hold every policy invariant (the suites run
// at either: CACHELENS_KERNELS=reference ctest). The set is read from CACHELENS_KERNELS at first
// use ("fast" when unset); `--kernels` on the command line and the app's setting override it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cl {

enum class KernelSet { Fast, Reference };

// The set in force. Throws InputError naming CACHELENS_KERNELS when its value is neither name
// (at every call until a set is chosen with set_kernel_set).
KernelSet kernel_set();
void set_kernel_set(KernelSet set);

// Whether the fast paths run (kernel_set() == KernelSet::Fast).
bool fast_kernels();

// "fast" / "reference", and back (nullopt for any other text).
const char* kernel_set_name(KernelSet set);
std::optional<KernelSet> kernel_set_named(std::string_view name);
// name -> its set, or an InputError on Setting{"kernels"} that names both choices.
KernelSet parse_kernel_set(std::string_view name);

// The environment variable kernel_set() reads.
inline constexpr const char* kKernelsEnvironment = "CACHELENS_KERNELS";

}  // namespace cl

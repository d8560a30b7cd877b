// The certainty prior of d2Cache and of the sampler's certainty-prior mode: for position i,
//   D(i) = sum_j exp(-(i-j)^2 / 2 sigma^2) [j not masked] / sum_j exp(-(i-j)^2 / 2 sigma^2),
// j over the positions within ceil(6 sigma) of i. CPU reference (what the engine runs on the CPU)
// and the device version, one thread per position (exp in double: equal to ~1 ulp).
#pragma once

#include <cstdint>

#include "engine/cuda/stream.h"

namespace cl::cuda {

struct DensityRange {
    int64_t begin = 0, end = 0;  // positions [begin, end) get D(i); the others are left alone
    double sigma = 10;
    bool masked_only = false;  // also leave the unmasked positions in range alone
};

// masked: (L) 0/1; out: (L) float64.
void certainty_density_cpu(const uint8_t* masked, int64_t L, DensityRange range, double* out);

// The same on the device (masked and out on the device).
void certainty_density(const uint8_t* masked, int64_t L, DensityRange range, double* out,
                       Stream stream);

}  // namespace cl::cuda

#include <cmath>

#include "engine/cuda/certainty_density.h"
#include "engine/cuda/cuda_check.h"

namespace cl::cuda {
namespace {

constexpr int kThreads = 128;

// One thread per position of the range, the CPU's loop over its neighbours as is.
__global__ void certainty_density_kernel(const uint8_t* masked, int64_t L, DensityRange range,
                                         double* out) {
    const int64_t i = range.begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= range.end || (range.masked_only && !masked[i])) return;
    const double two_s2 = 2.0 * range.sigma * range.sigma;
    const auto reach = static_cast<int64_t>(ceil(range.sigma * 6));
    double num = 0, den = 0;
    const int64_t first = i - reach > 0 ? i - reach : 0,
                  last = i + reach + 1 < L ? i + reach + 1 : L;
    for (int64_t j = first; j < last; ++j) {
        const double k = exp(-static_cast<double>((i - j) * (i - j)) / two_s2);
        den += k;
        if (!masked[j]) num += k;
    }
    out[i] = den > 0 ? num / den : 0;
}

}  // namespace

void certainty_density(const uint8_t* masked, int64_t L, DensityRange range, double* out,
                       Stream stream) {
    range.begin = range.begin < 0 ? 0 : range.begin;
    range.end = range.end > L ? L : range.end;
    if (range.end <= range.begin) return;
    const auto blocks = static_cast<unsigned>((range.end - range.begin + kThreads - 1) / kThreads);
    certainty_density_kernel<<<blocks, kThreads, 0, native(stream)>>>(masked, L, range, out);
    check_launch("certainty_density");
}

}  // namespace cl::cuda

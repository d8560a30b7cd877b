// Counter-based random numbers: every draw is a pure function of (seed, step, position, index),
// so any device, any batch order and any policy draw the same noise for the same key. The tensor
// version runs where the logits are (no host round trip); the scalar version is its reference.
//
// The hash is Chris Wellons' "lowbias32" on 32-bit values kept in int64 lanes; the multiply is
// split into 16-bit halves so no intermediate exceeds 2^49 (exact on every device, no overflow).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace cl::detail {

uint32_t hash32(uint32_t x);
// The 32-bit key of one row's stream: (seed, step, position) and a stream id (0, 1: the high and
// low bits of a double).
uint32_t row_key(uint64_t seed, int32_t step, int64_t position, uint32_t stream);
// Uniform in (0, 1) with 53 random bits for (seed, step, position, column): the scalar reference.
double counter_uniform(uint64_t seed, int32_t step, int64_t position, int64_t column);

// The same draws for every (row, column) at once: positions (M) int64 on any device ->
// (M, columns) float64 on that device.
torch::Tensor counter_uniform(uint64_t seed, int32_t step, const std::vector<int64_t>& positions,
                              int64_t columns, torch::Device device);

}  // namespace cl::detail

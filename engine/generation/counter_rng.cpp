#include "engine/generation/counter_rng.h"

namespace cl::detail {
namespace {

constexpr uint32_t kMul1 = 0x7feb352dU;
constexpr uint32_t kMul2 = 0x846ca68bU;
constexpr uint32_t kColumnMul = 0x9e3779b1U;  // spreads column indices over 32 bits

// (x * c) mod 2^32 on int64 lanes holding values below 2^32, without any product above 2^49.
torch::Tensor mul32(const torch::Tensor& x, uint32_t c) {
    const auto lo = static_cast<int64_t>(c & 0xffffU), hi = static_cast<int64_t>(c >> 16);
    auto high_part = ((x * hi).bitwise_and(0xffff)).__lshift__(16);
    return (x * lo + high_part).bitwise_and(int64_t{0xffffffff});
}

torch::Tensor hash32(const torch::Tensor& v) {  // lowbias32 on int64 lanes
    auto x = v.bitwise_xor(v.__rshift__(16));
    x = mul32(x, kMul1);
    x = x.bitwise_xor(x.__rshift__(15));
    x = mul32(x, kMul2);
    return x.bitwise_xor(x.__rshift__(16));
}

}  // namespace

uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= kMul1;
    x ^= x >> 15;
    x *= kMul2;
    x ^= x >> 16;
    return x;
}

uint32_t row_key(uint64_t seed, int32_t step, int64_t position, uint32_t stream) {
    uint32_t h = hash32(static_cast<uint32_t>(seed) ^ 0x6d617374U);
    h = hash32(h ^ static_cast<uint32_t>(seed >> 32));
    h = hash32(h ^ static_cast<uint32_t>(step));
    h = hash32(h ^ static_cast<uint32_t>(position));
    h = hash32(h ^ static_cast<uint32_t>(static_cast<uint64_t>(position) >> 32));
    return hash32(h ^ (stream * 0x85ebca6bU + 1U));
}

double counter_uniform(uint64_t seed, int32_t step, int64_t position, int64_t column) {
    const uint32_t col = static_cast<uint32_t>(column) * kColumnMul;
    const uint64_t a = hash32(hash32(row_key(seed, step, position, 0) ^ col));
    const uint64_t b = hash32(hash32(row_key(seed, step, position, 1) ^ col));
    // 21 bits of a, 32 of b, +0.5 so that the draw is never 0 or 1.
    const uint64_t bits = ((a >> 11) << 32) | b;
    return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

torch::Tensor counter_uniform(uint64_t seed, int32_t step, const std::vector<int64_t>& positions,
                              int64_t columns, torch::Device device) {
    const auto M = static_cast<int64_t>(positions.size());
    std::vector<int64_t> keys(static_cast<size_t>(2 * M));
    for (int64_t i = 0; i < M; ++i)
        for (uint32_t s = 0; s < 2; ++s)
            keys[static_cast<size_t>(s * M + i)] =
                row_key(seed, step, positions[static_cast<size_t>(i)], s);
    auto opts = torch::TensorOptions().dtype(torch::kLong);
    auto rows = torch::tensor(keys, opts).to(device).view({2, M, 1});  // (2, M, 1)
    auto col = mul32(torch::arange(columns, opts.device(device)), kColumnMul).view({1, 1, columns});
    auto h = hash32(hash32(rows.bitwise_xor(col)));  // (2, M, columns) 32-bit values
    auto bits = h[0].__rshift__(11).__lshift__(32).bitwise_or(h[1]);  // (M, columns) < 2^53
    return (bits.to(torch::kFloat64) + 0.5) * 0x1.0p-53;
}

}  // namespace cl::detail

// The exp of the CPU softmax (row_attention.cpp's score columns) and of silu (row_activation.cpp),
// written so that a loop over it vectorises: included only by those kernel units, which build with
// -fno-trapping-math and -fno-math-errno and clone per instruction set.
#pragma once

#include <cstdint>

namespace cl::detail::row_exp {

constexpr float kLog2e = 1.44269504088896341F;
// ln 2 split so that n * kLn2Hi is exact for |n| < 2^9 (Cody-Waite reduction).
constexpr float kLn2Hi = 0.693359375F;
constexpr float kLn2Lo = -2.12194440e-4F;
constexpr float kMinArg = -87.0F;  // 2^-125.5: still a normal float

// exp(x) for x <= 0: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by Cephes' degree-6 polynomial,
// 2^n built in the exponent bits. Branch-free, so a loop over it vectorises. A NaN or a value
// below kMinArg is taken as kMinArg.
// n = round(x / ln2) by adding 1.5 * 2^23, where the unit is the last bit, so that n is also in
// the sum's low bits as an integer: no conversion instructions. GCC vectorised the earlier
// truncating int conversion into a rounding, a conversion and more blends; the attention of 144
// query rows over 439 keys (4 heads of 32, one AVX2 core) takes 6-10% less time this way.
// Always inlined: GCC does not inline a plain function into the target clones otherwise.
[[gnu::always_inline]] inline float exp_of_nonpositive(float x) {
    constexpr float kRoundingShift = 0x1.8p23F;
    constexpr uint32_t kRoundingShiftBits = 0x4B400000U;  // the bits of 0x1.8p23
    x = x > kMinArg ? x : kMinArg;
    x = x < 0.0F ? x : 0.0F;
    const float shifted = x * kLog2e + kRoundingShift;
    const float n = shifted - kRoundingShift;
    const float r = (x - n * kLn2Hi) - n * kLn2Lo;
    float p = 1.9875691500e-4F;
    p = p * r + 1.3981999507e-3F;
    p = p * r + 8.3334519073e-3F;
    p = p * r + 4.1665795894e-2F;
    p = p * r + 1.6666665459e-1F;
    p = p * r + 5.0000001201e-1F;
    p = p * r * r + r + 1.0F;
    // n + 127 in the exponent field (n >= -126 here); unsigned, so the wrap-around is defined.
    const uint32_t exponent = (__builtin_bit_cast(uint32_t, shifted) - kRoundingShiftBits + 127U)
                              << 23U;
    // A builtin, not std::bit_cast: that is a function the clones would call.
    return p * __builtin_bit_cast(float, exponent);
}

}  // namespace cl::detail::row_exp

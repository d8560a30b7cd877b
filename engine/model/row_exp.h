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
// below kMinArg is taken as kMinArg (the int conversion of a NaN would be undefined).
// Always inlined: GCC does not inline a plain function into the target clones otherwise.
[[gnu::always_inline]] inline float exp_of_nonpositive(float x) {
    x = x >= kMinArg ? x : kMinArg;
    x = x <= 0.0F ? x : 0.0F;
    // n = round(x / ln2): for a non-positive argument truncating (y - 1/2) rounds to nearest, and a
    // truncating conversion vectorises where floor() would be a call.
    const auto n_int = static_cast<int32_t>(x * kLog2e - 0.5F);
    const auto n = static_cast<float>(n_int);
    const float r = (x - n * kLn2Hi) - n * kLn2Lo;
    float p = 1.9875691500e-4F;
    p = p * r + 1.3981999507e-3F;
    p = p * r + 8.3334519073e-3F;
    p = p * r + 4.1665795894e-2F;
    p = p * r + 1.6666665459e-1F;
    p = p * r + 5.0000001201e-1F;
    p = p * r * r + r + 1.0F;
    const auto exponent = static_cast<uint32_t>(n_int + 127) << 23U;
    // A builtin, not std::bit_cast: that is a function the clones would call.
    return p * __builtin_bit_cast(float, exponent);
}

}  // namespace cl::detail::row_exp

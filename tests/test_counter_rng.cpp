// The counter-based noise: the tensor version equals its scalar reference bit for bit, draws
// depend only on their key (not on which other rows are drawn with them), and look uniform.
#include <cmath>

#include "engine/generation/counter_rng.h"
#include "test_util.h"

namespace cl {
namespace {

TEST(CounterRng, TensorDrawsEqualTheScalarReference) {
    const std::vector<int64_t> positions{0, 1, 17, 4095, 1ll << 33};
    const int64_t columns = 300;
    auto u = detail::counter_uniform(99, 7, positions, columns, torch::kCPU).contiguous();
    ASSERT_EQ(u.sizes(), (std::vector<int64_t>{5, columns}));
    const double* p = u.data_ptr<double>();
    for (size_t r = 0; r < positions.size(); ++r)
        for (int64_t c = 0; c < columns; ++c)
            ASSERT_EQ(p[static_cast<int64_t>(r) * columns + c],
                      detail::counter_uniform(99, 7, positions[r], c))
                << "row " << r << " column " << c;
}

TEST(CounterRng, ADrawDependsOnlyOnItsKey) {
    auto both = detail::counter_uniform(3, 2, {5, 9}, 64, torch::kCPU);
    auto alone = detail::counter_uniform(3, 2, {9}, 64, torch::kCPU);
    EXPECT_TRUE(torch::equal(both[1], alone[0]));
    // Another seed, step or position gives other draws.
    EXPECT_FALSE(torch::equal(detail::counter_uniform(4, 2, {9}, 64, torch::kCPU)[0], alone[0]));
    EXPECT_FALSE(torch::equal(detail::counter_uniform(3, 3, {9}, 64, torch::kCPU)[0], alone[0]));
    EXPECT_FALSE(torch::equal(both[0], alone[0]));
}

TEST(CounterRng, DrawsAreUniformInTheOpenInterval) {
    auto u = detail::counter_uniform(1, 0, {0, 1, 2, 3}, 50000, torch::kCPU);  // 200k draws
    EXPECT_GT(u.min().item<double>(), 0.0);
    EXPECT_LT(u.max().item<double>(), 1.0);
    EXPECT_NEAR(u.mean().item<double>(), 0.5, 0.005);  // sd of the mean ~0.00065
    EXPECT_NEAR(u.var().item<double>(), 1.0 / 12.0, 0.002);
    // Ten equal bins each hold about a tenth (binomial sd ~0.00067).
    auto bins = (u * 10).floor().to(torch::kLong).flatten().bincount({}, 10).to(torch::kDouble) /
                static_cast<double>(u.numel());
    for (int64_t b = 0; b < 10; ++b) EXPECT_NEAR(bins[b].item<double>(), 0.1, 0.004) << b;
    // Neighbouring columns are uncorrelated.
    auto a = u.narrow(1, 0, 49999).flatten(), b = u.narrow(1, 1, 49999).flatten();
    const double corr = ((a - a.mean()) * (b - b.mean())).mean().item<double>() /
                        (a.std().item<double>() * b.std().item<double>());
    EXPECT_NEAR(corr, 0.0, 0.01);
}

}  // namespace
}  // namespace cl

// engine/cuda: each kernel against its CPU reference on random inputs (exact where the kernel
// repeats the reference's float operations, near where it reduces in another order), and the
// references against the definitions they implement. Device tests skip, saying why, where no CUDA
// device can be used (a build without the toolkit, or no GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "engine/cuda/attention_quant.h"
#include "engine/cuda/certainty_density.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/device_query.h"
#include "engine/cuda/elastic_drift.h"
#include "engine/cuda/event_timeline.h"
#include "engine/cuda/ranking.h"
#include "engine/trace/trace_types.h"

namespace {

using namespace cl::cuda;

#define SKIP_WITHOUT_DEVICE()                                                               \
    do {                                                                                    \
        const auto list = list_devices();                                                   \
        if (list.devices.empty()) GTEST_SKIP() << "no CUDA device here: " << list.why_none; \
    } while (0)

// Scores with many exact ties (a few distinct values), as confidences of a small model have.
std::vector<double> tied_scores(size_t n, std::mt19937& rng) {
    std::uniform_int_distribution<int> level(0, 7);
    std::vector<double> s(n);
    for (auto& v : s) v = level(rng) / 8.0;
    return s;
}

std::vector<uint8_t> random_flags(size_t n, double p, std::mt19937& rng) {
    std::bernoulli_distribution on(p);
    std::vector<uint8_t> f(n);
    for (auto& v : f) v = on(rng);
    return f;
}

// (H, R, L) softmax-like rows: positive, each head's row sums to 1.
std::vector<float> random_probs(ProbsShape s, std::mt19937& rng) {
    std::exponential_distribution<float> e(1.f);
    std::vector<float> p(static_cast<size_t>(s.heads * s.rows * s.keys));
    for (int64_t r = 0; r < s.heads * s.rows; ++r) {
        float sum = 0;
        for (int64_t c = 0; c < s.keys; ++c) sum += (p[r * s.keys + c] = e(rng) * e(rng));
        for (int64_t c = 0; c < s.keys; ++c) p[r * s.keys + c] /= sum;
    }
    return p;
}

// ---- CPU references against their definitions --------------------------------------------------

TEST(KernelReference, TopKIsTheStableDescendingRankOfEligibleEntries) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 50; ++trial) {
        const size_t n = 1 + rng() % 200;
        const auto score = tied_scores(n, rng);
        const auto eligible = random_flags(n, 0.6, rng);
        const int64_t k = static_cast<int64_t>(rng() % (n + 2));
        const auto got =
            select_top_k_cpu(score.data(), eligible.data(), static_cast<int64_t>(n), {.k = k});
        // Definition: i's rank is the number of eligible j with a higher score, or an equal score
        // and a lower index; the chosen are the eligible entries of rank < k, best first.
        std::vector<int64_t> want;
        for (int64_t r = 0; r < k; ++r)
            for (size_t i = 0; i < n; ++i) {
                if (!eligible[i]) continue;
                int64_t rank = 0;
                for (size_t j = 0; j < n; ++j)
                    rank += eligible[j] && (score[j] > score[i] || (score[j] == score[i] && j < i));
                if (rank == r) want.push_back(static_cast<int64_t>(i));
            }
        EXPECT_EQ(got, want) << "trial " << trial;
    }
}

// Elastic-Cache's tracked keys: top_attended_keys_cpu's one pass chooses what select_top_k_cpu
// ranks (excluded keys out, ties to the lower key), in ascending key order; tied sums, n from 0 to
// past the eligible keys, and no exclusions at all.
TEST(KernelReference, TopAttendedKeysAreTheTopKOfTheEligibleSums) {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 200; ++trial) {
        const size_t keys = 1 + rng() % 400;
        const auto sums = tied_scores(keys, rng);
        const auto excluded = random_flags(keys, trial % 3 == 0 ? 0.0 : 0.5, rng);
        std::vector<uint8_t> eligible(keys);
        for (size_t i = 0; i < keys; ++i) eligible[i] = excluded[i] ? 0 : 1;
        const int64_t n = static_cast<int64_t>(rng() % 18);
        auto want =
            select_top_k_cpu(sums.data(), eligible.data(), static_cast<int64_t>(keys), {.k = n});
        std::sort(want.begin(), want.end());
        EXPECT_EQ(top_attended_keys_cpu(sums.data(), static_cast<int64_t>(keys),
                                        trial % 3 == 0 ? nullptr : excluded.data(), n),
                  want)
            << "trial " << trial << ", " << keys << " keys, n " << n;
    }
}

TEST(KernelReference, TopKThresholdKeepsEveryScoreAboveItAndAtLeastTheBest) {
    const std::vector<double> score{0.2, 0.95, 0.5, 0.91, 0.97};
    const std::vector<uint8_t> eligible{1, 1, 1, 1, 0};
    EXPECT_EQ(select_top_k_cpu(score.data(), eligible.data(), 5, {.threshold = 0.9}),
              (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(select_top_k_cpu(score.data(), eligible.data(), 5, {.threshold = 0.99}),
              (std::vector<int64_t>{1}));
    EXPECT_TRUE(select_top_k_cpu(score.data(), nullptr, 0, {.threshold = 0.5}).empty());
}

TEST(KernelReference, CertaintyDensityIsOneAmongKnownTokensAndZeroAmongMasks) {
    std::vector<uint8_t> masked(100, 0);
    std::fill(masked.begin() + 40, masked.end(), 1);
    std::vector<double> d(100, -1.0);
    certainty_density_cpu(masked.data(), 100, {.begin = 0, .end = 100, .sigma = 2}, d.data());
    EXPECT_DOUBLE_EQ(d[10], 1.0);            // no mask within 6 sigma
    EXPECT_DOUBLE_EQ(d[90], 0.0);            // no known token within 6 sigma
    EXPECT_NEAR(d[39] + d[40], 1.0, 1e-12);  // the kernel is symmetric about the boundary
    EXPECT_GT(d[39], d[40]);
    std::vector<double> block(100, -1.0);
    certainty_density_cpu(masked.data(), 100,
                          {.begin = 40, .end = 50, .sigma = 2, .masked_only = true}, block.data());
    EXPECT_EQ(block[39], -1.0);  // outside the range: untouched
    EXPECT_EQ(block[50], -1.0);
    // A range alone has the bits it has in the whole.
    for (int i = 40; i < 50; ++i) EXPECT_EQ(block[i], d[i]) << "position " << i;
    // A kernel far wider than the sequence weighs every position about 1 (40 known of 100), and
    // its table of weights stops at the longest distance there is.
    std::vector<double> wide(100, -1.0);
    certainty_density_cpu(masked.data(), 100, {.begin = 0, .end = 100, .sigma = 1e12}, wide.data());
    EXPECT_NEAR(wide[0], 0.4, 1e-9);
    EXPECT_NEAR(wide[99], 0.4, 1e-9);
}

// The prior's definition, one position and one sum at a time in position order: the reference
// takes 16 positions side by side and must give these bits.
std::vector<double> density_by_definition(const std::vector<uint8_t>& masked, DensityRange r,
                                          std::vector<double> out) {
    const auto L = static_cast<int64_t>(masked.size());
    const auto reach = static_cast<int64_t>(std::ceil(r.sigma * 6));
    for (int64_t i = std::max<int64_t>(r.begin, 0); i < std::min(r.end, L); ++i) {
        if (r.masked_only && !masked[static_cast<size_t>(i)]) continue;
        double num = 0, den = 0;
        for (int64_t j = std::max<int64_t>(0, i - reach); j < std::min(L, i + reach + 1); ++j) {
            const double k =
                std::exp(-static_cast<double>((i - j) * (i - j)) / (2.0 * r.sigma * r.sigma));
            den += k;
            if (!masked[static_cast<size_t>(j)]) num += k;
        }
        out[static_cast<size_t>(i)] = den > 0 ? num / den : 0;
    }
    return out;
}

TEST(KernelReference, CertaintyDensityHasTheDefinitionsBitsEverywhere) {
    std::mt19937 rng(5);
    for (const int64_t L : {1, 7, 16, 100, 415})
        for (const double sigma : {0.1, 2.0, 10.0, 1e12})
            for (const bool masked_only : {false, true}) {
                std::vector<uint8_t> masked(static_cast<size_t>(L));
                for (auto& m : masked) m = static_cast<uint8_t>(rng() % 3 != 0);
                for (const auto& [b, e] : {std::pair<int64_t, int64_t>{0, L},
                                           {L / 3, L - L / 5},
                                           {-4, L + 9},
                                           {L / 2, L / 2}}) {
                    const DensityRange r{
                        .begin = b, .end = e, .sigma = sigma, .masked_only = masked_only};
                    std::vector<double> got(static_cast<size_t>(L), -1.0);
                    certainty_density_cpu(masked.data(), L, r, got.data());
                    const auto want =
                        density_by_definition(masked, r, std::vector<double>(got.size(), -1.0));
                    for (int64_t i = 0; i < L; ++i)
                        ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)])
                            << "L " << L << ", sigma " << sigma << ", [" << b << ", " << e
                            << "), masked only " << masked_only << ", position " << i;
                }
            }
}

TEST(KernelReference, MostAttendedKeysSkipExcludedKeysAndComeInKeyOrder) {
    // Two window rows over 5 keys; column sums 0.3, 0.9 (excluded), 0.5, 0.5, 0.1.
    const std::vector<double> attn{0.1, 0.4, 0.2, 0.3, 0.0, 0.2, 0.5, 0.3, 0.2, 0.1};
    const std::vector<uint8_t> excluded{0, 1, 0, 0, 0};
    EXPECT_EQ(most_attended_keys_cpu(attn.data(), 2, 5, excluded.data(), 2),
              (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(most_attended_keys_cpu(attn.data(), 2, 5, excluded.data(), 3),
              (std::vector<int64_t>{0, 2, 3}));
}

// The window head means and the window column sums by their definitions: a head mean is the float
// sum in head order divided by H, widened; a column sum is, kv head by kv head, the float64 sum of
// its heads' probabilities (heads in order, each over the window rows in order), the kv heads'
// sums then added in order. The loops are cloned per instruction set, so the key counts leave a
// vector's tail on every width.
TEST(KernelReference, WindowHeadMeansAndColumnSumsFollowTheirDefinitions) {
    std::mt19937 rng(5);
    for (const auto& [s, kv_heads] :
         {std::pair{ProbsShape{4, 20, 439}, int64_t{2}},
          std::pair{ProbsShape{6, 9, 37}, int64_t{3}}, std::pair{ProbsShape{3, 9, 37}, int64_t{1}},
          std::pair{ProbsShape{1, 2, 5}, int64_t{1}}}) {
        const auto probs = random_probs(s, rng);
        const std::vector<int32_t> rows{static_cast<int32_t>(s.rows - 1), 0, 1};
        const auto W = static_cast<int64_t>(rows.size());
        std::vector<double> means(static_cast<size_t>(W * s.keys), -1.0);
        std::vector<double> sums(static_cast<size_t>(s.keys), -1.0);
        window_head_mean_cpu(probs.data(), s, rows.data(), W, means.data());
        window_column_sums_cpu(probs.data(), s, kv_heads, rows.data(), W, sums.data());
        const auto p = [&](int64_t h, int64_t row, int64_t c) {
            return probs[static_cast<size_t>((h * s.rows + row) * s.keys + c)];
        };
        const int64_t g = s.heads / kv_heads;
        for (int64_t c = 0; c < s.keys; ++c) {
            for (int64_t w = 0; w < W; ++w) {
                float sum = 0.F;
                for (int64_t h = 0; h < s.heads; ++h) sum += p(h, rows[static_cast<size_t>(w)], c);
                const auto mean = static_cast<double>(sum / static_cast<float>(s.heads));
                ASSERT_EQ(means[static_cast<size_t>(w * s.keys + c)], mean) << w << " " << c;
                ASSERT_EQ(head_mean_cpu(probs.data(), s, rows[static_cast<size_t>(w)], c), mean);
            }
            double column = 0.0;
            for (int64_t n = 0; n < kv_heads; ++n) {
                double part = 0.0;
                for (int64_t h = n * g; h < (n + 1) * g; ++h)
                    for (int64_t w = 0; w < W; ++w)
                        part += static_cast<double>(p(h, rows[static_cast<size_t>(w)], c));
                column += part;
            }
            ASSERT_EQ(sums[static_cast<size_t>(c)], column) << c;
        }
    }
}

// The ranking of given column sums is most_attended_keys_cpu's of the rows they sum.
TEST(KernelReference, TopAttendedKeysRankAsMostAttendedKeys) {
    std::mt19937 rng(6);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const int64_t W = 3, keys = 41;
    std::vector<double> attn(static_cast<size_t>(W * keys));
    for (auto& a : attn) a = u(rng);
    std::vector<double> sums(static_cast<size_t>(keys), 0.0);
    for (int64_t w = 0; w < W; ++w)
        for (int64_t c = 0; c < keys; ++c)
            sums[static_cast<size_t>(c)] += attn[static_cast<size_t>(w * keys + c)];
    std::vector<uint8_t> excluded(static_cast<size_t>(keys), 0);
    for (int64_t c = 0; c < keys; c += 3) excluded[static_cast<size_t>(c)] = 1;
    for (const int64_t n : {1, 2, 4})
        EXPECT_EQ(top_attended_keys_cpu(sums.data(), keys, excluded.data(), n),
                  most_attended_keys_cpu(attn.data(), W, keys, excluded.data(), n));
}

TEST(KernelReference, DriftSumsCountOnlyRowsPresentInBothSteps) {
    std::mt19937 rng(3);
    const ProbsShape s{2, 3, 6};
    const auto probs = random_probs(s, rng);
    std::vector<double> prev(2 * 6, 0.0);
    const std::vector<int32_t> rows_before{0, 2};
    window_head_mean_cpu(probs.data(), s, rows_before.data(), 2, prev.data());
    const std::vector<int64_t> tracked{1, 4};
    // The same rows, the same probabilities: no drift.
    auto same =
        drift_sums_cpu(probs.data(), s, rows_before.data(), 2, prev.data(), tracked.data(), 2);
    EXPECT_TRUE(same.shared);
    EXPECT_NEAR(same.cosine(), 1.0, 1e-12);
    const std::vector<int32_t> gone{-1, -1};
    EXPECT_FALSE(
        drift_sums_cpu(probs.data(), s, gone.data(), 2, prev.data(), tracked.data(), 2).shared);
    // The previous window's means at the tracked keys only, (W, n), and this step's read one at a
    // time (the CPU attention's kept scores): the same sums, bit for bit.
    std::vector<double> before;
    for (int64_t w = 0; w < 2; ++w)
        for (const int64_t key : tracked) before.push_back(prev[static_cast<size_t>(w * 6 + key)]);
    const auto now = [&](int64_t row, int64_t key) {
        return head_mean_cpu(probs.data(), s, row, key);
    };
    const auto tracked_only =
        drift_sums_tracked_cpu(now, rows_before.data(), 2, before.data(), tracked.data(), 2);
    EXPECT_TRUE(tracked_only.shared);
    EXPECT_EQ(tracked_only.dot, same.dot);
    EXPECT_EQ(tracked_only.now_sq, same.now_sq);
    EXPECT_EQ(tracked_only.before_sq, same.before_sq);
    EXPECT_FALSE(
        drift_sums_tracked_cpu(now, gone.data(), 2, before.data(), tracked.data(), 2).shared);
}

// ---- Kernels against the references (need a device) ------------------------------------------

TEST(CudaKernels, HeadMeanQuantizeEqualsTheTraceRecordsQuantisation) {
    SKIP_WITHOUT_DEVICE();
    std::mt19937 rng(11);
    for (const ProbsShape s :
         {ProbsShape{4, 37, 301}, ProbsShape{1, 5, 7}, ProbsShape{32, 64, 1100}}) {
        auto probs = random_probs(s, rng);
        probs[3] = std::numeric_limits<float>::quiet_NaN();  // skipped by the max
        probs[static_cast<size_t>(s.keys) + 1] =
            std::numeric_limits<float>::infinity();  // row reads 0
        cl::trace::AttentionMap want;
        want.rows = static_cast<int32_t>(s.rows);
        want.cols = static_cast<int32_t>(s.keys);
        want.set_head_mean(probs.data(), static_cast<int32_t>(s.heads));
        DeviceArray<float> d_probs(probs);
        DeviceArray<uint8_t> levels(static_cast<size_t>(s.rows * s.keys));
        DeviceArray<float> scale(static_cast<size_t>(s.rows));
        head_mean_quantize(d_probs.get(), static_cast<int32_t>(s.heads),
                           static_cast<int32_t>(s.rows), static_cast<int32_t>(s.keys), levels.get(),
                           scale.get(), nullptr);
        EXPECT_EQ(levels.to_host(), want.levels) << s.heads << "x" << s.rows << "x" << s.keys;
        EXPECT_EQ(scale.to_host(), want.row_scale);
    }
}

TEST(CudaKernels, SelectTopKEqualsTheReference) {
    SKIP_WITHOUT_DEVICE();
    std::mt19937 rng(5);
    for (int trial = 0; trial < 40; ++trial) {
        const size_t n = 1 + rng() % 3000;
        const auto score = tied_scores(n, rng);
        const auto eligible = random_flags(n, 0.7, rng);
        const TopKRule rule = trial % 2 ? TopKRule{.k = static_cast<int64_t>(rng() % 64)}
                                        : TopKRule{.threshold = 0.6};
        const auto want =
            select_top_k_cpu(score.data(), eligible.data(), static_cast<int64_t>(n), rule);
        DeviceArray<double> d_score(score);
        DeviceArray<uint8_t> d_eligible(eligible), chosen(n);
        DeviceArray<int32_t> rank(n);
        select_top_k(d_score.get(), d_eligible.get(), static_cast<int64_t>(n), rule, chosen.get(),
                     rank.get(), nullptr);
        const auto c = chosen.to_host();
        const auto r = rank.to_host();
        std::vector<int64_t> got(want.size(), -1);
        size_t count = 0;
        for (size_t i = 0; i < n; ++i)
            if (c[i]) {
                ++count;
                ASSERT_LT(static_cast<size_t>(r[i]), got.size()) << "trial " << trial;
                got[static_cast<size_t>(r[i])] = static_cast<int64_t>(i);
            }
        EXPECT_EQ(count, want.size()) << "trial " << trial;
        EXPECT_EQ(got, want) << "trial " << trial;
    }
}

TEST(CudaKernels, ElasticTrackingAndDriftEqualTheReference) {
    SKIP_WITHOUT_DEVICE();
    std::mt19937 rng(9);
    const ProbsShape s{8, 24, 333};
    const int64_t kv_heads = 2;
    const auto before = random_probs(s, rng), now = random_probs(s, rng);
    const std::vector<int32_t> window_rows{0, 3, 4, 9, 17};
    const auto W = static_cast<int64_t>(window_rows.size());
    std::vector<double> prev(static_cast<size_t>(W * s.keys));
    window_head_mean_cpu(before.data(), s, window_rows.data(), W, prev.data());
    const auto excluded = random_flags(static_cast<size_t>(s.keys), 0.4, rng);
    std::vector<double> want_sums(static_cast<size_t>(s.keys));
    window_column_sums_cpu(before.data(), s, kv_heads, window_rows.data(), W, want_sums.data());
    const auto tracked = top_attended_keys_cpu(want_sums.data(), s.keys, excluded.data(), 4);
    const std::vector<int32_t> rows_now{2, -1, 5, 11, 23};
    const auto want = drift_sums_cpu(now.data(), s, rows_now.data(), W, prev.data(), tracked.data(),
                                     static_cast<int64_t>(tracked.size()));

    DeviceArray<float> d_before(before), d_now(now);
    DeviceArray<int32_t> d_rows(window_rows), d_rows_now(rows_now);
    DeviceArray<double> d_prev(static_cast<size_t>(W * s.keys)), sums(static_cast<size_t>(s.keys));
    window_head_mean(d_before.get(), s, d_rows.get(), W, d_prev.get(), nullptr);
    EXPECT_EQ(d_prev.to_host(), prev);  // the same float sums in the same order
    DeviceArray<uint8_t> d_excluded(excluded), chosen(static_cast<size_t>(s.keys));
    window_column_sums(d_before.get(), s, kv_heads, d_rows.get(), W, d_excluded.get(), sums.get(),
                       nullptr);
    const auto got_sums = sums.to_host();
    for (int64_t c = 0; c < s.keys; ++c) {  // the same float64 sums in the same order
        if (!excluded[static_cast<size_t>(c)]) {
            EXPECT_EQ(got_sums[static_cast<size_t>(c)], want_sums[static_cast<size_t>(c)]) << c;
        }
    }
    std::vector<uint8_t> eligible(excluded.size());
    for (size_t i = 0; i < eligible.size(); ++i) eligible[i] = !excluded[i];
    DeviceArray<uint8_t> d_eligible(eligible);
    select_top_k(sums.get(), d_eligible.get(), s.keys, {.k = 4}, chosen.get(), nullptr, nullptr);
    std::vector<int64_t> got_tracked;
    const auto c = chosen.to_host();
    for (size_t i = 0; i < c.size(); ++i)
        if (c[i]) got_tracked.push_back(static_cast<int64_t>(i));
    EXPECT_EQ(got_tracked, tracked);

    DeviceArray<int64_t> d_tracked(tracked);
    DeviceArray<double> d_sums(3);
    DeviceArray<int32_t> shared(1);
    drift_sums(d_now.get(), s, d_rows_now.get(), W, d_prev.get(), d_tracked.get(),
               static_cast<int64_t>(tracked.size()), d_sums.get(), shared.get(), nullptr);
    const auto got = d_sums.to_host();
    EXPECT_NEAR(got[0], want.dot, 1e-12 * std::abs(want.dot));
    EXPECT_NEAR(got[1], want.now_sq, 1e-12 * want.now_sq);
    EXPECT_NEAR(got[2], want.before_sq, 1e-12 * want.before_sq);
    EXPECT_EQ(shared.to_host()[0], 4);  // rows present in both steps
}

TEST(CudaKernels, CertaintyDensityEqualsTheReference) {
    SKIP_WITHOUT_DEVICE();
    std::mt19937 rng(13);
    const int64_t L = 700;
    const auto masked = random_flags(static_cast<size_t>(L), 0.5, rng);
    for (const DensityRange range :
         {DensityRange{0, L, 10, true}, DensityRange{96, 128, 3.5, false}}) {
        std::vector<double> want(static_cast<size_t>(L), -1.0);
        certainty_density_cpu(masked.data(), L, range, want.data());
        DeviceArray<uint8_t> d_masked(masked);
        DeviceArray<double> out(want.size());
        std::vector<double> init(want.size(), -1.0);
        copy_to_device(out.get(), init.data(), init.size() * sizeof(double));
        certainty_density(d_masked.get(), L, range, out.get(), nullptr);
        const auto got = out.to_host();
        for (size_t i = 0; i < want.size(); ++i)
            EXPECT_NEAR(got[i], want[i], 1e-14) << "position " << i;
    }
}

// The per-layer times of a GPU step: marks around queued work read as the device ran it.
TEST(CudaKernels, EventTimelineTimesWorkQueuedBetweenMarks) {
    SKIP_WITHOUT_DEVICE();
    std::mt19937 rng(9);
    const size_t n = 4096;
    DeviceArray<double> score(tied_scores(n, rng));
    DeviceArray<uint8_t> chosen(n);
    EventTimeline timeline(0);
    for (int round = 0; round < 2; ++round) {  // the second reuses the first's events
        timeline.clear();
        const int start = timeline.mark(nullptr);
        select_top_k(score.get(), nullptr, static_cast<int64_t>(n), {.k = 64}, chosen.get(),
                     nullptr, nullptr);
        const int middle = timeline.mark(nullptr);
        for (int i = 0; i < 20; ++i)
            select_top_k(score.get(), nullptr, static_cast<int64_t>(n), {.k = 64}, chosen.get(),
                         nullptr, nullptr);
        const int end = timeline.mark(nullptr);
        const float one = timeline.elapsed_ms(start, middle), all = timeline.elapsed_ms(start, end);
        EXPECT_GT(one, 0.f);
        EXPECT_GT(all, one) << "twenty launches after the first";
        EXPECT_NEAR(timeline.elapsed_ms(start, middle) + timeline.elapsed_ms(middle, end), all,
                    1e-3 + 1e-3 * all);
    }
    EXPECT_THROW((void)timeline.elapsed_ms(0, 99), std::out_of_range);
}

TEST(CudaDevices, EveryListedDeviceHasANameAndMemoryOrTheListSaysWhyItIsEmpty) {
    const auto list = list_devices();
    if (list.devices.empty()) {
        EXPECT_FALSE(list.why_none.empty());
        return;
    }
    for (const auto& d : list.devices) {
        EXPECT_FALSE(d.name.empty());
        EXPECT_GT(d.total_bytes, 0u);
        EXPECT_NE(d.label().find("cuda:" + std::to_string(d.index)), std::string::npos);
    }
}

}  // namespace

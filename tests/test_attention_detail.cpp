// Attention at a level of detail (engine/trace/attention_detail.h): the tile rule, the pooled
// map against a plain float64 reference and against the device's tensor-op pooling, and a real
// run whose maps stay inside their budget however many steps it takes.
#include <torch/torch.h>

#include <cmath>

#include "engine/base/errors.h"
#include "engine/generation/attention_pooling.h"
#include "engine/generation/generator.h"
#include "engine/generation/memory_estimate.h"
#include "engine/model/model_writer.h"
#include "engine/trace/attention_detail.h"
#include "engine/trace/trace_store.h"
#include "test_requests.h"
#include "test_util.h"

namespace cl {
namespace {

std::shared_ptr<Model> tiny() {
    static std::shared_ptr<Model> m = Model::load(test::make_tiny_model("detail", 32, 3, 4, 4, 5));
    return m;
}

using test::request;

// Bytes the store's maps hold: levels plus each stored row's position and scale.
double attention_bytes(const trace::TraceStore& store, int32_t run) {
    double bytes = 0;
    for (const auto& s : store.steps(run))
        for (const auto& a : s->attention)
            bytes += static_cast<double>(a.levels.size()) + 8.0 * static_cast<double>(a.rows);
    return bytes;
}

TEST(AttentionDetail, TheTileIsTheSmallestThatFitsTheBudget) {
    // LLaDA-8B's shape at the default budget: 32 layers, L = 1,280, 1,024 steps.
    const int32_t t =
        trace::attention_tile_for_budget(trace::kDefaultAttentionBudgetBytes, 32, 1280, 1024);
    EXPECT_LE(trace::attention_run_bytes(t, 32, 1280, 1024), trace::kDefaultAttentionBudgetBytes);
    EXPECT_GT(trace::attention_run_bytes(t - 1, 32, 1280, 1024),
              trace::kDefaultAttentionBudgetBytes);
    // The embedded model's runs fit at full resolution.
    EXPECT_EQ(trace::attention_tile_for_budget(trace::kDefaultAttentionBudgetBytes, 6, 320, 256),
              1);
    // A cached step of few rows keeps them whole; a full step pools its rows too.
    EXPECT_EQ(trace::attention_detail_for(t, 32, 1280, false).row_tile, 1);
    EXPECT_EQ(trace::attention_detail_for(t, 1280, 1280, false).row_tile, t);
    EXPECT_TRUE(trace::attention_detail_for(t, 1280, 1280, true).full_resolution());
}

// At LLaDA-8B's layer count and length the estimate's trace stays bounded at the default budget
// (the full maps alone were 54 GB), so the shapes of the papers are never refused for it.
TEST(AttentionDetail, TheEstimateAtTheRealShapeCountsThePooledMaps) {
    const auto config = tiny_config(128, 32, 32, 32);
    const auto e =
        estimate_run_memory(config, 1280, 1024, trace::kDefaultAttentionBudgetBytes, false);
    EXPECT_LE(e.attention_bytes, trace::kDefaultAttentionBudgetBytes);
    EXPECT_LT(e.trace_bytes, 1e9) << e.describe();
    EXPECT_NE(e.describe().find("at a 256 MB budget"), std::string::npos) << e.describe();
    const auto full = estimate_run_memory(config, 1280, 1024, trace::kDefaultAttentionBudgetBytes,
                                          false, /*full_resolution_layers=*/32);
    EXPECT_GT(full.attention_bytes, 50e9) << "every layer at full resolution: " << full.describe();
}

TEST(AttentionDetail, ABudgetTooSmallIsRefusedNamingTheSetting) {
    EXPECT_THROW(trace::attention_tile_for_budget(100, 32, 1280, 1024), std::invalid_argument);
    EXPECT_THROW(trace::attention_tile_for_budget(-1, 32, 1280, 1024), std::invalid_argument);
    EXPECT_THROW(trace::attention_tile_for_budget(NAN, 32, 1280, 1024), std::invalid_argument);
    trace::TraceStore store;
    store.set_want_all_attention_means(true);
    store.set_attention_budget(10);
    try {
        Generator g(tiny(), request(16, 16, 16), &store);
        FAIL() << "a 10-byte attention budget was accepted";
    } catch (const InputError& e) {
        EXPECT_EQ(e.setting(), "attention_budget") << e.what();
        EXPECT_NE(std::string(e.what()).find("needs at least"), std::string::npos) << e.what();
    }
}

// The pooled map's cells against a float64 mean over each tile's heads, keys and computed rows.
TEST(AttentionDetail, PooledCellsAreTheMeansOfTheirTiles) {
    const int32_t H = 3, L = 29;
    const std::vector<int32_t> positions{0, 1, 2, 5, 6, 11, 12, 13, 20, 28};
    const auto R = static_cast<int64_t>(positions.size());
    auto maps = torch::rand({H, R, L});
    maps = maps / maps.sum(-1, true);  // each row a distribution
    for (int32_t rt : {1, 4}) {
        trace::AttentionMap a;
        a.keys = L;
        a.key_tile = 4;
        a.row_tile = rt;
        a.set_pooled_head_mean(maps.data_ptr<float>(), H, positions);
        ASSERT_EQ(a.cols, 8);  // ceil(29 / 4): the last tile holds one key
        const auto acc = maps.accessor<float, 3>();
        for (int32_t r = 0; r < a.rows; ++r) {
            const int32_t first = a.row_index[static_cast<size_t>(r)];
            for (int32_t c = 0; c < a.cols; ++c) {
                double sum = 0;
                int n = 0;
                for (int64_t i = 0; i < R; ++i) {
                    const int32_t p = positions[static_cast<size_t>(i)];
                    if (p - p % rt != first) continue;
                    for (int32_t k = c * 4; k < std::min(L, c * 4 + 4); ++k, ++n)
                        for (int32_t h = 0; h < H; ++h) sum += acc[h][i][k];
                }
                ASSERT_GT(n, 0);
                const double want = sum / (n * H);
                EXPECT_NEAR(a.prob(r, c), want,
                            0.5 / 255 * a.row_scale[static_cast<size_t>(r)] + 1e-6)
                    << "row tile " << rt << ", stored row " << r << ", column " << c;
                // prob_at reads the same cell from any position and key inside it.
                EXPECT_EQ(a.prob_at(first, std::min(L - 1, c * 4 + 3)), a.prob(r, c));
            }
        }
        EXPECT_EQ(a.rows, rt == 1 ? R : 6);  // positions fall in 6 tiles of 4
        EXPECT_TRUE(std::isnan(a.prob_at(rt == 1 ? 3 : 16, 0))) << "no computed row there";
    }
}

// The device's pooling (tensor ops, run here on the CPU) gives the loop's cells.
TEST(AttentionDetail, TensorOpPoolingEqualsTheReferenceLoop) {
    const int32_t H = 4, L = 37;
    const std::vector<int32_t> positions{3, 4, 5, 9, 10, 17, 30, 31, 36};
    auto maps = torch::rand({H, static_cast<int64_t>(positions.size()), L});
    for (int32_t rt : {1, 5}) {
        const trace::AttentionDetail d{5, rt};
        std::vector<int32_t> first;
        auto pooled = detail::pool_attention(maps, positions, d, first).contiguous();
        trace::AttentionMap a;
        a.keys = L;
        a.key_tile = 5;
        a.row_tile = rt;
        a.set_pooled_head_mean(maps.data_ptr<float>(), H, positions);
        ASSERT_EQ(first, a.row_index);
        ASSERT_EQ(pooled.size(0), a.rows);
        ASSERT_EQ(pooled.size(1), a.cols);
        trace::AttentionMap b = a;
        b.set_probs(pooled.data_ptr<float>());
        for (size_t i = 0; i < a.levels.size(); ++i)
            EXPECT_LE(std::abs(int{a.levels[i]} - int{b.levels[i]}), 1) << "cell " << i;
        for (size_t r = 0; r < a.row_scale.size(); ++r)
            EXPECT_NEAR(a.row_scale[r], b.row_scale[r], 1e-6f);
    }
}

// A real run at a budget its full maps do not fit: every map is pooled, a layer asked for at
// full resolution is not, and the maps stay within the budget at 4 and at 4x the steps (the
// store does not grow with steps x layers x L^2).
TEST(AttentionDetail, ARunsMapsStayWithinTheBudgetAndAFullResolutionLayerIsHonoured) {
    for (int64_t steps : {16, 64}) {
        trace::TraceStore store;
        store.set_want_all_attention_means(true);
        const int64_t L = static_cast<int64_t>(tiny()->tokenizer().encode("What is 2 + 2?").size());
        const double budget = 40e3;
        store.set_attention_budget(budget);
        store.request_full_resolution(1);
        Generator g(tiny(), request(64, 64, steps), &store);
        ASSERT_GT(g.info().attention_tile, 1) << "this budget must pool (L = " << L + 64 << ")";
        g.run();
        double pooled = 0;
        for (const auto& s : store.steps(0))
            for (const auto& a : s->attention) {
                if (a.layer == 1) {
                    EXPECT_TRUE(a.full_resolution()) << "step " << s->step;
                    EXPECT_EQ(a.cols, s->seq_len);
                    continue;
                }
                EXPECT_EQ(a.key_tile, g.info().attention_tile) << "step " << s->step;
                EXPECT_EQ(a.key_count(), s->seq_len);
                pooled += static_cast<double>(a.levels.size()) + 8.0 * a.rows;
            }
        EXPECT_GT(pooled, 0);
        EXPECT_LE(pooled, budget) << steps << " steps";
        EXPECT_GT(attention_bytes(store, 0), pooled) << "layer 1's full maps come on top";
    }
}

}  // namespace
}  // namespace cl

// The fused few-rows layer (few_rows_layer.h) against the op-by-op path it replaces for a cached
// step's rows: the same kernels on the same rows, so the same bits, at 1 and 2 threads and at row
// counts on both sides of a thread's share.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "engine/model/blocks.h"
#include "engine/model/few_rows_layer.h"
#include "engine/model/model.h"
#include "engine/model/transformer.h"
#include "scoped_threads.h"
#include "test_util.h"

namespace cl {
namespace {

constexpr int64_t kKeys = 150;

struct Layer {
    std::shared_ptr<Model> model;  // owns the weights
    detail::LayerWeights w;        // layer 0, biases added where asked
    int64_t heads = 0, kv_heads = 0;
    double eps = 0;
};

// A loaded tiny LLaDA model's first layer (grouped-query heads: 4 over 2), in panels as a CPU
// load stores it; with_bias adds q, k, v biases as Dream's layers have. d_model 64 has heads of
// 16 values, whose columns are not whole tiles, so few_rows_qkv splits them by rows at 2 threads;
// 128 has heads of 32, split by kv heads.
Layer tiny_layer(bool with_bias, int64_t d_model = 64) {
    Layer l;
    l.model = Model::load(test::make_tiny_model("few_rows_layer", d_model, 1, 4, 2));
    l.w = l.model->net().weights().layers.at(0);
    l.heads = l.model->config().n_heads;
    l.kv_heads = l.model->config().n_kv_heads;
    l.eps = l.model->config().rms_norm_eps;
    if (with_bias) {
        l.w.q_bias = torch::randn({l.w.q_proj.size(0)});
        l.w.k_bias = torch::randn({l.w.k_proj.size(0)});
        l.w.v_bias = torch::randn({l.w.v_proj.size(0)});
    }
    return l;
}

// R distinct positions among kKeys, ascending.
std::vector<int64_t> some_positions(int64_t R) {
    const auto chosen = std::get<0>(torch::randperm(kKeys).narrow(0, 0, R).sort()).contiguous();
    return {chosen.data_ptr<int64_t>(), chosen.data_ptr<int64_t>() + R};
}

void expect_same_qkv(const Layer& l, int64_t R, const std::string& at) {
    const int64_t D = l.w.attn_norm.size(0), Dh = l.w.q_proj.size(0) / l.heads;
    const auto h = torch::randn({R, D});
    const auto positions = some_positions(R);
    const detail::RopeTables rope(10000.0, Dh, kKeys, torch::kCPU);
    const auto [cos, sin] = rope.at(torch::tensor(positions));  // (R, Dh)
    detail::LayerCache fused, op_by_op;
    fused.k = torch::randn({l.kv_heads, kKeys, Dh});
    fused.v = torch::randn({l.kv_heads, kKeys, Dh});
    op_by_op.k = fused.k.clone();
    op_by_op.v = fused.v.clone();
    ASSERT_TRUE(detail::fits_few_rows_layer(l.w, h, &fused)) << at;
    const auto got =
        detail::few_rows_qkv(l.w, h, cos, sin, l.heads, l.kv_heads, l.eps, &fused, positions);
    const auto want = detail::project_qkv(l.w, detail::rms_norm(h, l.w.attn_norm, l.eps), cos, sin,
                                          l.heads, l.kv_heads);
    const auto index = torch::tensor(positions);
    op_by_op.k.index_copy_(1, index, want.k);
    op_by_op.v.index_copy_(1, index, want.v);
    EXPECT_TRUE(torch::equal(got.q, want.q)) << at << ": q";
    EXPECT_TRUE(torch::equal(got.k, want.k)) << at << ": k";
    EXPECT_TRUE(torch::equal(got.v, want.v)) << at << ": v";
    EXPECT_TRUE(torch::equal(fused.k, op_by_op.k)) << at << ": the K cache";
    EXPECT_TRUE(torch::equal(fused.v, op_by_op.v)) << at << ": the V cache";
}

void expect_same_output_and_mlp(const Layer& l, int64_t R, const std::string& at) {
    const int64_t D = l.w.attn_norm.size(0);
    const auto residual = torch::randn({R, D});
    const auto attn = torch::randn({R, l.w.attn_out.size(1)});  // (R, H*Dh)
    auto got = residual.clone();
    ASSERT_TRUE(detail::fits_few_rows_layer(l.w, got, nullptr)) << at;
    detail::few_rows_output_and_mlp(l.w, got, attn, l.eps);
    auto want = detail::add_linear(residual.clone(), attn, l.w.attn_out, l.w.attn_out_panels);
    want = detail::gated_mlp(l.w, detail::rms_norm(want, l.w.ff_norm, l.eps), want);
    EXPECT_TRUE(torch::equal(got, want))
        << at << ": max difference " << (got - want).abs().max().item<double>();
}

// The feature-cache layer (dLLM-Cache): fresh outputs into the cached features, every row's
// residual advanced by its features.
void expect_same_features(const Layer& l, int64_t R, const std::string& at) {
    const int64_t D = l.w.attn_norm.size(0);
    const auto residual = torch::randn({kKeys, D});
    const auto attn = torch::randn({R, l.w.attn_out.size(1)});  // (R, H*Dh)
    const auto positions = some_positions(R);
    detail::LayerCache fused;
    fused.attn_out = torch::randn({kKeys, D});
    fused.ffn_out = torch::randn({kKeys, D});
    detail::LayerCache op_by_op{{}, {}, {}, fused.attn_out.clone(), fused.ffn_out.clone()};
    auto got = residual.clone();
    ASSERT_TRUE(detail::fits_few_rows_features(l.w, got, R, fused)) << at;
    detail::few_rows_features(l.w, got, attn, positions, fused, l.eps);
    const auto index = torch::tensor(positions);
    auto want = residual.clone();
    op_by_op.attn_out.index_copy_(0, index,
                                  detail::linear(attn, l.w.attn_out, {}, l.w.attn_out_panels));
    want.add_(op_by_op.attn_out);
    op_by_op.ffn_out.index_copy_(
        0, index,
        detail::gated_mlp(l.w, detail::rms_norm(want.index_select(0, index), l.w.ff_norm, l.eps)));
    want.add_(op_by_op.ffn_out);
    EXPECT_TRUE(torch::equal(fused.attn_out, op_by_op.attn_out)) << at << ": attention outputs";
    EXPECT_TRUE(torch::equal(fused.ffn_out, op_by_op.ffn_out)) << at << ": FFN outputs";
    EXPECT_TRUE(torch::equal(got, want))
        << at << ": residual, max difference " << (got - want).abs().max().item<double>();
}

TEST(FewRowsLayer, EqualsTheOpByOpPathBitForBit) {
    torch::manual_seed(21);
    torch::InferenceMode g;
    for (const bool with_bias : {false, true}) {
        for (const int64_t d_model : {64, 128}) {
            const auto l = tiny_layer(with_bias, d_model);
            for (const int threads : {1, 2, 3}) {
                const test::ScopedThreads scope(threads);
                // 1 row, one thread's share (6), two uneven shares, a cached step's 22, the most.
                for (const int64_t R : {1, 6, 7, 13, 22, 127}) {
                    const std::string at =
                        std::to_string(R) + " rows, d_model " + std::to_string(d_model) + ", " +
                        std::to_string(threads) + " threads" + (with_bias ? ", biases" : "");
                    expect_same_qkv(l, R, at);
                    expect_same_output_and_mlp(l, R, at);
                    expect_same_features(l, R, at);
                }
            }
        }
    }
}

TEST(FewRowsLayer, TakesOnlyWhatItsKernelsCan) {
    torch::InferenceMode g;
    const auto l = tiny_layer(false);
    const int64_t D = l.w.attn_norm.size(0);
    EXPECT_TRUE(detail::fits_few_rows_layer(l.w, torch::randn({22, D}), nullptr));
    EXPECT_FALSE(detail::fits_few_rows_layer(l.w, torch::randn({128, D}), nullptr))
        << "a full step's rows go op by op, split by rows";
    EXPECT_FALSE(
        detail::fits_few_rows_layer(l.w, torch::randn({22, D}).to(torch::kFloat64), nullptr));
    EXPECT_FALSE(detail::fits_few_rows_layer(l.w, torch::randn({D, 22}).t(), nullptr))
        << "rows that are not contiguous";
    auto no_panels = l.w;
    no_panels.gate_up_panels = torch::Tensor();
    EXPECT_FALSE(detail::fits_few_rows_layer(no_panels, torch::randn({22, D}), nullptr));
    detail::LayerCache strided;
    strided.k = torch::randn({kKeys, 2, 16}).transpose(0, 1);
    strided.v = torch::randn({2, kKeys, 16});
    EXPECT_FALSE(detail::fits_few_rows_layer(l.w, torch::randn({22, D}), &strided))
        << "a K cache the rows cannot be copied into as (Hkv, L, Dh)";
    detail::LayerCache features;
    features.attn_out = torch::randn({kKeys, D});
    features.ffn_out = torch::randn({kKeys, D});
    EXPECT_TRUE(detail::fits_few_rows_features(l.w, torch::randn({kKeys, D}), 22, features));
    EXPECT_FALSE(detail::fits_few_rows_features(l.w, torch::randn({kKeys, D}), 128, features));
    EXPECT_FALSE(detail::fits_few_rows_features(l.w, torch::randn({kKeys - 1, D}), 22, features))
        << "features of other rows than the residual's";
    features.ffn_out = torch::Tensor();
    EXPECT_FALSE(detail::fits_few_rows_features(l.w, torch::randn({kKeys, D}), 22, features));
}

TEST(FewRowsLayer, APositionOutsideTheCacheThrowsBeforeAnythingIsWritten) {
    torch::InferenceMode g;
    const auto l = tiny_layer(false);
    const int64_t D = l.w.attn_norm.size(0), Dh = l.w.q_proj.size(0) / l.heads;
    const detail::RopeTables rope(10000.0, Dh, kKeys, torch::kCPU);
    const auto [cos, sin] = rope.at(torch::tensor(std::vector<int64_t>{3, 9}));
    detail::LayerCache cache;
    cache.k = torch::zeros({l.kv_heads, kKeys, Dh});
    cache.v = torch::zeros({l.kv_heads, kKeys, Dh});
    EXPECT_THROW(detail::few_rows_qkv(l.w, torch::randn({2, D}), cos, sin, l.heads, l.kv_heads,
                                      l.eps, &cache, {3, kKeys}),
                 std::out_of_range);
    EXPECT_EQ(cache.k.abs().sum().item<double>(), 0.0) << "a row was written";
    EXPECT_EQ(cache.v.abs().sum().item<double>(), 0.0);
    detail::LayerCache features;
    features.attn_out = torch::zeros({kKeys, D});
    features.ffn_out = torch::zeros({kKeys, D});
    auto h = torch::zeros({kKeys, D});
    EXPECT_THROW(detail::few_rows_features(l.w, h, torch::randn({2, l.w.attn_out.size(1)}), {-1, 3},
                                           features, l.eps),
                 std::out_of_range);
    EXPECT_EQ(features.attn_out.abs().sum().item<double>(), 0.0) << "a row was written";
    EXPECT_EQ(h.abs().sum().item<double>(), 0.0) << "the residual was changed";
}

}  // namespace
}  // namespace cl

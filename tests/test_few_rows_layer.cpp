// The fused few-rows layer (few_rows_layer.h) against the op-by-op path it replaces for a cached
// step's rows: the same kernels on the same rows, so the same bits, at 1 and 2 threads and at row
// counts on both sides of a thread's share.
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/elastic_drift.h"
#include "engine/kernels/row_attention.h"
#include "engine/model/blocks.h"
#include "engine/model/few_rows_layer.h"
#include "engine/model/model.h"
#include "engine/model/transformer.h"
#include "scoped_kernel_set.h"
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

// R random rows at random positions of a K/V cache, twice (the two paths' caches).
struct QkvInputs {
    torch::Tensor h;  // (R, D)
    std::vector<int64_t> positions;
    torch::Tensor cos, sin;  // (R, Dh)
    detail::LayerCache fused, other;
};

QkvInputs qkv_inputs(const Layer& l, int64_t R) {
    const int64_t D = l.w.attn_norm.size(0), Dh = l.w.q_proj.size(0) / l.heads;
    QkvInputs in;
    in.h = torch::randn({R, D});
    in.positions = some_positions(R);
    const detail::RopeTables rope(10000.0, Dh, kKeys, torch::kCPU);
    std::tie(in.cos, in.sin) = rope.at(torch::tensor(in.positions));
    in.fused.k = torch::randn({l.kv_heads, kKeys, Dh});
    in.fused.v = torch::randn({l.kv_heads, kKeys, Dh});
    in.other.k = in.fused.k.clone();
    in.other.v = in.fused.v.clone();
    return in;
}

void expect_same_qkv(const Layer& l, int64_t R, const std::string& at) {
    auto in = qkv_inputs(l, R);
    ASSERT_TRUE(detail::fits_few_rows_layer(l.w, in.h, &in.fused)) << at;
    const auto got = detail::few_rows_qkv(l.w, in.h, in.cos, in.sin, l.heads, l.kv_heads, l.eps,
                                          &in.fused, in.positions);
    const auto want = detail::project_qkv(l.w, detail::rms_norm(in.h, l.w.attn_norm, l.eps), in.cos,
                                          in.sin, l.heads, l.kv_heads);
    const auto index = torch::tensor(in.positions);
    in.other.k.index_copy_(1, index, want.k);
    in.other.v.index_copy_(1, index, want.v);
    EXPECT_TRUE(torch::equal(got.q, want.q)) << at << ": q";
    EXPECT_TRUE(torch::equal(got.k, want.k)) << at << ": k";
    EXPECT_TRUE(torch::equal(got.v, want.v)) << at << ": v";
    EXPECT_TRUE(torch::equal(in.fused.k, in.other.k)) << at << ": the K cache";
    EXPECT_TRUE(torch::equal(in.fused.v, in.other.v)) << at << ": the V cache";
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
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
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
                // The feature layer takes more rows too, in blocks per thread: past one block
                // (64 rows), and every row.
                for (const int64_t R : {int64_t{128}, kKeys})
                    expect_same_features(l, R,
                                         std::to_string(R) + " feature rows, d_model " +
                                             std::to_string(d_model) + ", " +
                                             std::to_string(threads) + " threads");
            }
        }
    }
}

// The q/k/v pass and the attention in one region (each thread its kv heads through both) against
// the two calls: the same q, k, v, cache, output and kept probabilities, bit for bit.
void expect_same_qkv_attention(const Layer& l, int64_t R, bool with_probs, const std::string& at) {
    auto in = qkv_inputs(l, R);
    ASSERT_TRUE(detail::fuses_qkv_and_attention(in.h, in.fused, l.heads, l.kv_heads)) << at;
    const std::vector<int64_t> kept = {0, R / 2, R - 1};  // rows whose probabilities are kept
    torch::Tensor got_probs, want_probs;
    const auto got = detail::few_rows_qkv_attention(
        l.w, in.h, in.cos, in.sin, l.heads, l.kv_heads, l.eps, in.fused, in.positions,
        with_probs ? &got_probs : nullptr, with_probs ? &kept : nullptr);
    const auto qkv = detail::few_rows_qkv(l.w, in.h, in.cos, in.sin, l.heads, l.kv_heads, l.eps,
                                          &in.other, in.positions);
    const auto want =
        detail::attend(qkv.q, in.other.k, in.other.v, with_probs ? &want_probs : nullptr,
                       with_probs ? &kept : nullptr);
    EXPECT_TRUE(torch::equal(got.qkv.q, qkv.q)) << at << ": q";
    EXPECT_TRUE(torch::equal(got.qkv.k, qkv.k)) << at << ": k";
    EXPECT_TRUE(torch::equal(got.qkv.v, qkv.v)) << at << ": v";
    EXPECT_TRUE(torch::equal(in.fused.k, in.other.k)) << at << ": the K cache";
    EXPECT_TRUE(torch::equal(in.fused.v, in.other.v)) << at << ": the V cache";
    EXPECT_TRUE(torch::equal(got.attn, want)) << at << ": attention output";
    if (with_probs) {
        EXPECT_TRUE(torch::equal(got_probs, want_probs)) << at << ": probabilities";
    }
}

TEST(FewRowsLayer, QkvAndAttentionInOneRegionEqualTheTwoCalls) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::manual_seed(22);
    torch::InferenceMode g;
    for (const bool with_bias : {false, true}) {
        const auto l = tiny_layer(with_bias, 128);  // heads of 32 values: whole tiles
        for (const int threads : {2, 3}) {
            const test::ScopedThreads scope(threads);
            for (const int64_t R : {6, 13, 22, 127})  // 127: two chunks of query rows a kv head
                for (const bool with_probs : {false, true})
                    expect_same_qkv_attention(
                        l, R, with_probs,
                        std::to_string(R) + " rows, " + std::to_string(threads) + " threads" +
                            (with_probs ? ", probabilities" : "") + (with_bias ? ", biases" : ""));
        }
    }
    const test::ScopedThreads one(1);
    const auto l = tiny_layer(false, 128);
    detail::LayerCache cache;
    cache.k = torch::randn({l.kv_heads, kKeys, 32});
    cache.v = torch::randn({l.kv_heads, kKeys, 32});
    EXPECT_FALSE(
        detail::fuses_qkv_and_attention(torch::randn({22, 128}), cache, l.heads, l.kv_heads))
        << "one thread keeps the rows' pass and the attention's own region (and its head means)";
}

// The whole layer in one region (few_rows_layer, into h and in.fused) and its parts
// (few_rows_qkv_attention into in.other, then few_rows_output_and_mlp on a copy of in.h).
struct LayerAndParts {
    detail::FewRowsLayerResult got;
    detail::QkvAttention want;
    torch::Tensor want_h;
};
LayerAndParts layer_and_parts(const Layer& l, QkvInputs& in, torch::Tensor& h,
                              const std::vector<int64_t>& kept,
                              const detail::LayerMidpoint& midpoint, torch::Tensor& got_probs,
                              torch::Tensor& want_probs) {
    LayerAndParts out;
    out.got = detail::few_rows_layer(l.w, h, in.cos, in.sin, l.heads, l.kv_heads, l.eps, in.fused,
                                     in.positions, &got_probs, &kept, midpoint);
    out.want = detail::few_rows_qkv_attention(l.w, in.h, in.cos, in.sin, l.heads, l.kv_heads, l.eps,
                                              in.other, in.positions, &want_probs, &kept);
    out.want_h = in.h.clone();
    detail::few_rows_output_and_mlp(l.w, out.want_h, out.want.attn, l.eps);
    return out;
}

// The whole layer in one region (few_rows_layer) against its parts, few_rows_qkv_attention and
// then few_rows_output_and_mlp: the same q, k, v, caches, attention output, kept probabilities
// and rows, bit for bit. go_on runs once, on the calling thread, after the attention (its
// probabilities sum to 1). A layer that stops leaves the rows as they came, unless the other
// threads may run theirs before go_on answers.
void expect_same_layer(const Layer& l, int64_t R, bool go_on, bool rows_before_go_on,
                       const std::string& at) {
    auto in = qkv_inputs(l, R);
    const std::vector<int64_t> kept = {0, R / 2, R - 1};
    torch::Tensor got_probs, want_probs;
    auto h = in.h.clone();
    const auto caller = std::this_thread::get_id();
    int verdicts = 0;
    detail::LayerMidpoint midpoint;
    midpoint.go_on = [&] {
        ++verdicts;
        EXPECT_EQ(std::this_thread::get_id(), caller) << at;
        EXPECT_TRUE(torch::allclose(got_probs.sum(-1), torch::ones({1}), 0, 1e-5))
            << at << ": go_on before the attention";
        return go_on;
    };
    midpoint.rows_before_go_on = rows_before_go_on;
    const int64_t D = in.h.size(1);
    midpoint.keep_inputs = torch::full({kKeys, D}, -7.0F);  // (L, D): the hidden cache
    const auto [got, want, want_h] =
        layer_and_parts(l, in, h, kept, midpoint, got_probs, want_probs);
    EXPECT_EQ(verdicts, 1) << at;
    EXPECT_EQ(got.finished, go_on) << at;
    EXPECT_TRUE(torch::equal(got.qkv.q, want.qkv.q)) << at << ": q";
    EXPECT_TRUE(torch::equal(got.qkv.k, want.qkv.k)) << at << ": k";
    EXPECT_TRUE(torch::equal(got.qkv.v, want.qkv.v)) << at << ": v";
    EXPECT_TRUE(torch::equal(in.fused.k, in.other.k)) << at << ": the K cache";
    EXPECT_TRUE(torch::equal(in.fused.v, in.other.v)) << at << ": the V cache";
    EXPECT_TRUE(torch::equal(got.attn, want.attn)) << at << ": attention output";
    EXPECT_TRUE(torch::equal(got_probs, want_probs)) << at << ": probabilities";
    if (go_on) {
        EXPECT_TRUE(torch::equal(h, want_h)) << at << ": rows";
    } else if (!rows_before_go_on) {
        EXPECT_TRUE(torch::equal(h, in.h)) << at << ": rows of a layer that stopped";
    }
    // The inputs are kept whether or not the layer goes on: an escalation starts from them.
    auto want_kept = torch::full({kKeys, D}, -7.0F);
    want_kept.index_copy_(0, torch::tensor(in.positions), in.h);
    EXPECT_TRUE(torch::equal(midpoint.keep_inputs, want_kept)) << at << ": kept inputs";
}

TEST(FewRowsLayer, TheLayerInOneRegionEqualsItsParts) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::manual_seed(23);
    torch::InferenceMode g;
    for (const bool with_bias : {false, true}) {
        const auto l = tiny_layer(with_bias, 128);  // heads of 32 values: whole tiles
        for (const int threads : {2, 3}) {
            const test::ScopedThreads scope(threads);
            for (const int64_t R : {6, 13, 22, 127})
                for (const bool go_on : {true, false})
                    for (const bool early : {false, true})
                        expect_same_layer(l, R, go_on, early,
                                          std::to_string(R) + " rows, " + std::to_string(threads) +
                                              " threads" + (go_on ? "" : ", stopped") +
                                              (early ? ", rows before go_on" : "") +
                                              (with_bias ? ", biases" : ""));
        }
    }
}

// With LayerMidpoint::scores: where each kv head's rows are one chunk (R g <= 64), the attention
// keeps its scores and writes no probabilities; scores gets them once on the calling thread before
// go_on, and the kept rows' float32 head mean read there (one value at a time) and after the layer
// (FewRowsLayerResult::kept, valid until the next attention keeps scores) is window_head_mean_cpu's
// over the probabilities of the two-call path, bit for bit; the window rows' column sums, each kv
// head's part summed by the thread that ran it, are window_column_sums_cpu's. Past one chunk the
// probabilities come as asked, and no sums.
void expect_kept_scores(const Layer& l, int64_t R, const std::string& at) {
    auto in = qkv_inputs(l, R);
    const std::vector<int64_t> kept = {0, R / 2, R - 1};
    const std::vector<int64_t> window = {R / 2, R - 1};  // query rows, each a kept row
    const auto P = static_cast<int64_t>(kept.size());
    torch::Tensor got_probs, want_probs;
    auto h = in.h.clone();
    const auto caller = std::this_thread::get_id();
    const detail::KeptScores* scores = nullptr;
    int handed = 0;
    auto during = torch::full({P, kKeys}, NAN, torch::kFloat64);
    auto after = during.clone();
    const auto read = [&](const detail::KeptScores& k, torch::Tensor& into) {
        for (int64_t p = 0; p < P; ++p)
            for (int64_t j = 0; j < kKeys; ++j)
                into.data_ptr<double>()[p * kKeys + j] = k.mean_at(p, j);
    };
    detail::LayerMidpoint midpoint;
    midpoint.scores = [&](const detail::KeptScores& k) {
        ++handed;
        EXPECT_EQ(std::this_thread::get_id(), caller) << at;
        scores = &k;
    };
    midpoint.window_rows = &window;
    midpoint.go_on = [&] {
        if (scores) read(*scores, during);
        return true;
    };
    const auto [got, want, want_h] =
        layer_and_parts(l, in, h, kept, midpoint, got_probs, want_probs);
    EXPECT_TRUE(torch::equal(got.attn, want.attn)) << at << ": attention output";
    EXPECT_TRUE(torch::equal(h, want_h)) << at << ": rows";
    if (R * l.heads / l.kv_heads > 64) {
        EXPECT_EQ(handed, 0) << at;
        EXPECT_FALSE(got.kept) << at;
        EXPECT_TRUE(got.window_sums.empty()) << at;
        EXPECT_TRUE(got_probs.defined() && torch::equal(got_probs, want_probs)) << at;
        return;
    }
    EXPECT_EQ(handed, 1) << at;
    EXPECT_FALSE(got_probs.defined()) << at << ": no probabilities written";
    ASSERT_TRUE(got.kept) << at;
    read(*got.kept, after);
    const auto p = want_probs.contiguous();  // (H, P, L)
    const cuda::ProbsShape shape{l.heads, P, kKeys};
    const std::vector<int32_t> all{0, 1, 2}, window_of_kept{1, 2};
    auto mean = torch::empty({P, kKeys}, torch::kFloat64);
    cuda::window_head_mean_cpu(p.data_ptr<float>(), shape, all.data(), P, mean.data_ptr<double>());
    EXPECT_TRUE(torch::equal(during, mean)) << at << ": the mean during the region";
    EXPECT_TRUE(torch::equal(after, mean)) << at << ": the mean after the layer";
    std::vector<double> sums(static_cast<size_t>(kKeys));
    cuda::window_column_sums_cpu(p.data_ptr<float>(), shape, l.kv_heads, window_of_kept.data(), 2,
                                 sums.data());
    EXPECT_EQ(got.window_sums, sums) << at << ": the window's column sums";
}

TEST(FewRowsLayer, KeepsTheAttentionsScoresWhereAskedAndItCan) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::manual_seed(24);
    torch::InferenceMode g;
    const auto l = tiny_layer(false, 128);
    for (const int threads : {2, 3}) {
        const test::ScopedThreads scope(threads);
        for (const int64_t R : {6, 13, 22, 32, 33, 127})
            expect_kept_scores(
                l, R, std::to_string(R) + " rows, " + std::to_string(threads) + " threads");
    }
}

// d2Cache's layer at 2+ threads, each thread its rows through the whole layer
// (few_rows_layer_with_head_mean), against its parts at one thread (few_rows_qkv, attend with the
// head mean, few_rows_output_and_mlp): the same q, k, v, caches, attention output, head mean and
// rows, bit for bit. 127 rows of 2 query heads a kv head take two chunks a share (32 rows each).
void expect_same_head_mean_layer(const Layer& l, int64_t R, int threads, const std::string& at) {
    auto in = qkv_inputs(l, R);
    auto h = in.h.clone();
    detail::HeadMeanLayer got;
    {
        const test::ScopedThreads scope(threads);
        ASSERT_TRUE(detail::fits_few_rows_layer(l.w, h, &in.fused)) << at;
        ASSERT_TRUE(detail::fuses_layer_with_head_mean(h, in.fused)) << at;
        got = detail::few_rows_layer_with_head_mean(l.w, h, in.cos, in.sin, l.heads, l.kv_heads,
                                                    l.eps, in.fused, in.positions);
    }
    const test::ScopedThreads one(1);
    const auto qkv = detail::few_rows_qkv(l.w, in.h, in.cos, in.sin, l.heads, l.kv_heads, l.eps,
                                          &in.other, in.positions);
    torch::Tensor want_mean;
    const auto want_attn =
        detail::attend(qkv.q, in.other.k, in.other.v, nullptr, nullptr, &want_mean);
    auto want_h = in.h.clone();
    detail::few_rows_output_and_mlp(l.w, want_h, want_attn, l.eps);
    EXPECT_TRUE(torch::equal(got.qkv.q, qkv.q)) << at << ": q";
    EXPECT_TRUE(torch::equal(got.qkv.k, qkv.k)) << at << ": k";
    EXPECT_TRUE(torch::equal(got.qkv.v, qkv.v)) << at << ": v";
    EXPECT_TRUE(torch::equal(in.fused.k, in.other.k)) << at << ": the K cache";
    EXPECT_TRUE(torch::equal(in.fused.v, in.other.v)) << at << ": the V cache";
    EXPECT_TRUE(torch::equal(got.attn, want_attn)) << at << ": attention output";
    EXPECT_TRUE(torch::equal(got.head_mean, want_mean)) << at << ": head mean";
    EXPECT_TRUE(torch::equal(h, want_h))
        << at << ": rows, max difference " << (h - want_h).abs().max().item<double>();
}

TEST(FewRowsLayer, TheHeadMeanLayerByRowsEqualsItsPartsAtOneThread) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::manual_seed(25);
    torch::InferenceMode g;
    for (const bool with_bias : {false, true})
        for (const int64_t d_model : {64, 128}) {
            const auto l = tiny_layer(with_bias, d_model);
            for (const int threads : {2, 3})
                for (const int64_t R : {12, 13, 22, 66, 127})
                    expect_same_head_mean_layer(
                        l, R, threads,
                        std::to_string(R) + " rows, d_model " + std::to_string(d_model) + ", " +
                            std::to_string(threads) + " threads" + (with_bias ? ", biases" : ""));
        }
    const auto l = tiny_layer(false, 128);
    detail::LayerCache cache;
    cache.k = torch::randn({l.kv_heads, kKeys, 32});
    cache.v = torch::randn({l.kv_heads, kKeys, 32});
    const test::ScopedThreads two(2);
    EXPECT_FALSE(detail::fuses_layer_with_head_mean(torch::randn({11, 128}), cache))
        << "fewer rows than two threads' shares";
    const test::ScopedThreads one(1);
    EXPECT_FALSE(detail::fuses_layer_with_head_mean(torch::randn({22, 128}), cache))
        << "one thread keeps attend's head-mean tasks";
}

// dLLM-Cache's V-verify probe: rows of the residual at positions, normed, through v (and k with
// RoPE), against the op-by-op probe the transformer runs where few_rows_probe does not fit.
void expect_same_probe(const Layer& l, const std::vector<int64_t>& positions, bool with_k,
                       const std::string& at) {
    const int64_t D = l.w.attn_norm.size(0), Dh = l.w.q_proj.size(0) / l.heads;
    const auto h = torch::randn({kKeys, D});
    const detail::RopeTables rope(10000.0, Dh, kKeys, torch::kCPU);
    const auto [cos, sin] = rope.prefix(kKeys);  // (L, Dh)
    ASSERT_TRUE(detail::fits_few_rows_probe(l.w, h, l.heads, l.kv_heads, with_k)) << at;
    const auto got =
        detail::few_rows_probe(l.w, h, positions, cos, sin, l.heads, l.kv_heads, l.eps, with_k);
    const auto index = torch::tensor(positions);
    const auto xp = detail::rms_norm(h.index_select(0, index), l.w.attn_norm, l.eps);  // (P, D)
    const auto v = detail::split_heads(detail::linear(xp, l.w.v_proj, l.w.v_bias), l.kv_heads);
    // The op-by-op products take 16 rows or more through the same kernel (fewer: OpenBLAS).
    const auto P = static_cast<int64_t>(positions.size());
    const auto same = [&](const torch::Tensor& a, const torch::Tensor& b) {
        return P >= 16 ? torch::equal(a, b) : torch::allclose(a, b, 1e-5, 1e-5);
    };
    EXPECT_TRUE(same(got.v, v)) << at << ": v, max difference "
                                << (got.v - v).abs().max().item<double>();
    ASSERT_EQ(got.k.defined(), with_k) << at;
    if (!with_k) return;
    const auto k = detail::RopeTables::apply(
        detail::split_heads(detail::linear(xp, l.w.k_proj, l.w.k_bias), l.kv_heads),
        cos.index_select(0, index), sin.index_select(0, index));
    EXPECT_TRUE(same(got.k, k)) << at << ": k, max difference "
                                << (got.k - k).abs().max().item<double>();
}

TEST(FewRowsLayer, TheProbeInOneRegionEqualsTheOpByOpProbe) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::manual_seed(23);
    torch::InferenceMode g;
    for (const bool with_bias : {false, true})
        for (const int64_t d_model : {64, 128}) {
            const auto l = tiny_layer(with_bias, d_model);
            for (const int threads : {1, 2, 3}) {
                const test::ScopedThreads scope(threads);
                // Few rows, a share's block and past it (64), a response span, every row.
                for (const int64_t P :
                     {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{65}, int64_t{130}, kKeys})
                    for (const bool with_k : {false, true}) {
                        auto positions = some_positions(P);
                        if (P % 2 == 0) std::reverse(positions.begin(), positions.end());
                        expect_same_probe(
                            l, positions, with_k,
                            std::to_string(P) + " rows, d_model " + std::to_string(d_model) + ", " +
                                std::to_string(threads) + " threads" +
                                (with_bias ? ", biases" : "") + (with_k ? ", with k" : ""));
                    }
            }
        }
    // Refused where its kernels cannot: rows of another type, weights not in panels.
    const auto l = tiny_layer(false);
    const int64_t D = l.w.attn_norm.size(0);
    EXPECT_FALSE(detail::fits_few_rows_probe(l.w, torch::randn({kKeys, D}, torch::kFloat64),
                                             l.heads, l.kv_heads, false));
    auto no_panels = l.w;
    no_panels.qkv_panels = torch::Tensor();
    EXPECT_FALSE(detail::fits_few_rows_probe(no_panels, torch::randn({kKeys, D}), l.heads,
                                             l.kv_heads, true));
    // A position past the residual's rows is named, not read.
    const detail::RopeTables rope(10000.0, l.w.q_proj.size(0) / l.heads, kKeys, torch::kCPU);
    const auto [cos, sin] = rope.prefix(kKeys);
    try {
        (void)detail::few_rows_probe(l.w, torch::randn({kKeys, D}), {3, kKeys}, cos, sin, l.heads,
                                     l.kv_heads, l.eps, false);
        ADD_FAILURE() << "a position outside the rows did not throw";
    } catch (const std::out_of_range& e) {
        const std::string named = "few_rows_probe: position " + std::to_string(kKeys);
        EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
}

TEST(FewRowsLayer, KeepsInputsOnlyWhereTheyFit) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::InferenceMode g;
    const auto l = tiny_layer(false, 128);
    const test::ScopedThreads scope(2);
    auto in = qkv_inputs(l, 22);
    detail::LayerMidpoint midpoint;
    for (const auto& keep : {torch::zeros({kKeys - 1, 128}), torch::zeros({kKeys, 64}),
                             torch::zeros({kKeys, 128}, torch::kFloat64)}) {
        midpoint.keep_inputs = keep;
        try {
            detail::few_rows_layer(l.w, in.h, in.cos, in.sin, l.heads, l.kv_heads, l.eps, in.fused,
                                   in.positions, nullptr, nullptr, midpoint);
            ADD_FAILURE() << "no error for " << keep.sizes();
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("few_rows_layer: the inputs are kept in"),
                      std::string::npos)
                << e.what();
            EXPECT_NE(std::string(e.what()).find("(" + std::to_string(kKeys) + ", 128) float32"),
                      std::string::npos)
                << e.what();
        }
    }
}

TEST(FewRowsLayer, TakesOnlyWhatItsKernelsCan) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
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
    EXPECT_TRUE(detail::fits_few_rows_features(l.w, torch::randn({kKeys, D}), kKeys, features))
        << "every row (dLLM-Cache's layer 0)";
    EXPECT_FALSE(detail::fits_few_rows_features(l.w, torch::randn({kKeys, D}), kKeys + 1, features))
        << "more rows than the residual has";
    EXPECT_FALSE(detail::fits_few_rows_features(l.w, torch::randn({kKeys - 1, D}), 22, features))
        << "features of other rows than the residual's";
    features.ffn_out = torch::Tensor();
    EXPECT_FALSE(detail::fits_few_rows_features(l.w, torch::randn({kKeys, D}), 22, features));
}

TEST(FewRowsLayer, APositionOutsideTheCacheThrowsBeforeAnythingIsWritten) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
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

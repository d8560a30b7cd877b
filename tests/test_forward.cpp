// The LLaDA forward against a naive float64 reference, and the plan forward against the full one.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>

#include "engine/base/assets.h"
#include "engine/base/cpu_clones.h"
#include "engine/base/errors.h"
#include "engine/cuda/elastic_drift.h"
#include "engine/kernels/row_activation.h"
#include "engine/kernels/row_attention.h"
#include "engine/kernels/row_gemm.h"
#include "engine/kernels/row_head_mean.h"
#include "engine/model/blocks.h"
#include "engine/model/empty_buffer.h"
#include "engine/model/model.h"
#include "engine/model/safetensors.h"
#include "engine/model/transformer.h"
#include "plan_test_util.h"
#include "scoped_kernel_set.h"
#include "scoped_threads.h"
#include "test_util.h"

namespace cl {
namespace {

// A plan forward driven by lambdas: the plan of each layer and an observer.
struct LambdaHooks final : detail::LayerHooks {
    std::function<detail::LayerPlan(int)> plan_fn;
    std::function<void(const detail::LayerResult&)> observer;
    std::function<bool(const detail::LayerResult&)> escalate_fn;
    detail::LayerPlan plan(int l) override { return plan_fn ? plan_fn(l) : detail::LayerPlan{}; }
    bool escalate(const detail::LayerResult& r) override { return escalate_fn && escalate_fn(r); }
    void observe(const detail::LayerResult& r) override {
        if (observer) observer(r);
    }
};

torch::Tensor run_plan(const detail::Transformer& net, const torch::Tensor& ids,
                       std::vector<detail::LayerCache>& cache, detail::RowSet& rows,
                       std::function<detail::LayerPlan(int)> plan = {},
                       std::function<void(const detail::LayerResult&)> observer = {},
                       std::function<bool(const detail::LayerResult&)> escalate = {}) {
    LambdaHooks hooks;
    hooks.plan_fn = std::move(plan);
    hooks.observer = std::move(observer);
    hooks.escalate_fn = std::move(escalate);
    return net.forward_plan(ids, hooks, cache, rows);
}

detail::RowSet row_set(std::vector<int64_t> rows) {
    return detail::RowSet::from_host(std::move(rows), torch::kCPU);
}

// The K/V cache a full forward of ids leaves at 1 thread (the same cache for every thread count a
// test then runs a cached plan at), and the rows it ran.
struct FilledCache {
    std::vector<detail::LayerCache> cache;
    detail::RowSet rows;
};
FilledCache filled_cache(const detail::Transformer& net, const torch::Tensor& ids) {
    FilledCache out{net.make_cache(ids.size(0), true), {}};
    const test::ScopedThreads one(1);
    run_plan(net, ids, out.cache, out.rows);
    return out;
}

using test::nmse;

// Attention probabilities (H, R, L) of q (H, R, Dh) over k (Hkv, L, Dh), one head at a time.
torch::Tensor naive_probabilities(const torch::Tensor& q, const torch::Tensor& k) {
    const int64_t H = q.size(0), Hkv = k.size(0), Dh = q.size(-1);
    std::vector<torch::Tensor> heads;
    for (int64_t h = 0; h < H; ++h) {
        const int64_t kvh = h / (H / Hkv);
        heads.push_back(torch::softmax(
            torch::matmul(q[h], k[kvh].t()) / std::sqrt(static_cast<double>(Dh)), -1));
    }
    return torch::stack(heads);
}

// softmax(q k^T / sqrt(Dh)) v head by head in the inputs' dtype, query head h on kv head
// h / (H / Hkv) (repeat_interleave semantics). q (H, R, Dh), k and v (Hkv, L, Dh) -> (R, H*Dh).
torch::Tensor naive_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v) {
    const int64_t H = q.size(0), Hkv = k.size(0);
    const auto p = naive_probabilities(q, k);  // (H, R, L)
    std::vector<torch::Tensor> heads;
    for (int64_t h = 0; h < H; ++h) heads.push_back(torch::matmul(p[h], v[h / (H / Hkv)]));
    return torch::cat(heads, 1);
}

torch::Tensor f64(const torch::Tensor& t) {
    return t.to(torch::kFloat64);
}

using test::ScopedThreads;

// The row kernels' vector widths this CPU runs (16 floats on AVX-512, 8 on AVX2, 4 on SSE2: every
// one up to its own), each in turn as the cap while fn runs; the cap is lifted after (also when an
// ASSERT leaves fn early).
void at_every_vector_width(const std::function<void(const std::string&)>& fn) {
    struct Lift {
        ~Lift() { cpu::limit_vector_floats(0); }
    } lift;
    const int native = cpu::vector_floats();
    for (int floats : {16, 8, 4}) {
        if (floats > native) continue;
        cpu::limit_vector_floats(floats == native ? 0 : floats);
        ASSERT_EQ(cpu::vector_floats(), floats);
        fn(std::to_string(floats) + "-float vectors");
    }
}

// An independent implementation, float64 unless asked otherwise: explicit per-head loops, RoPE
// from std::cos/std::sin.
torch::Tensor naive_forward(const ModelConfig& c, detail::TransformerWeights w,
                            const std::vector<int64_t>& ids,
                            torch::ScalarType dtype = torch::kFloat64) {
    auto d = [dtype](const torch::Tensor& t) { return t.to(dtype); };
    const int64_t L = static_cast<int64_t>(ids.size()), H = c.n_heads, Hkv = c.n_kv_heads,
                  Dh = c.head_dim();
    auto norm = [&](const torch::Tensor& x, const torch::Tensor& g) {
        return x / torch::sqrt(x.pow(2).mean(-1, true) + c.rms_norm_eps) * d(g);
    };
    // RoPE table in float64 with the libm functions.
    auto cosT = torch::zeros({L, Dh}, torch::kFloat64),
         sinT = torch::zeros({L, Dh}, torch::kFloat64);
    for (int64_t p = 0; p < L; ++p)
        for (int64_t i = 0; i < Dh / 2; ++i) {
            const double f = static_cast<double>(p) / std::pow(c.rope_theta, 2.0 * i / Dh);
            cosT[p][i] = std::cos(f);
            cosT[p][i + Dh / 2] = std::cos(f);
            sinT[p][i] = std::sin(f);
            sinT[p][i + Dh / 2] = std::sin(f);
        }
    cosT = cosT.to(dtype);
    sinT = sinT.to(dtype);
    auto rope = [&](const torch::Tensor& x) {  // (L, Dh)
        auto out = torch::empty_like(x);
        for (int64_t i = 0; i < Dh / 2; ++i) {
            out.select(1, i) =
                x.select(1, i) * cosT.select(1, i) - x.select(1, i + Dh / 2) * sinT.select(1, i);
            out.select(1, i + Dh / 2) = x.select(1, i + Dh / 2) * cosT.select(1, i + Dh / 2) +
                                        x.select(1, i) * sinT.select(1, i + Dh / 2);
        }
        return out;
    };
    auto h = d(w.wte).index_select(0, torch::tensor(ids));  // (L, D)
    for (const auto& lw : w.layers) {
        auto x = norm(h, lw.attn_norm);
        auto q = torch::matmul(x, d(lw.q_proj).t()), k = torch::matmul(x, d(lw.k_proj).t()),
             v = torch::matmul(x, d(lw.v_proj).t());
        if (lw.q_bias.defined()) {  // Qwen2-style q/k/v biases
            q = q + d(lw.q_bias);
            k = k + d(lw.k_bias);
            v = v + d(lw.v_bias);
        }
        std::vector<torch::Tensor> qs, ks, vs;  // per head: (L, Dh)
        for (int64_t hd = 0; hd < H; ++hd) qs.push_back(rope(q.narrow(1, hd * Dh, Dh)));
        for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
            ks.push_back(rope(k.narrow(1, kvh * Dh, Dh)));
            vs.push_back(v.narrow(1, kvh * Dh, Dh));
        }
        const auto heads = naive_attention(torch::stack(qs), torch::stack(ks), torch::stack(vs));
        h = h + torch::matmul(heads, d(lw.attn_out).t());
        auto y = norm(h, lw.ff_norm);
        auto g = torch::matmul(y, d(lw.ff_proj).t());
        h = h + torch::matmul(g * torch::sigmoid(g) * torch::matmul(y, d(lw.up_proj).t()),
                              d(lw.ff_out).t());
    }
    return torch::matmul(norm(h, w.ln_f), d(w.head).t());  // (L, V)
}

std::vector<int64_t> some_ids(int64_t n, int64_t vocab, uint64_t seed = 3) {
    std::mt19937_64 rng(seed);
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (auto& i : ids) i = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
    return ids;
}

TEST(Forward, RopeMatchesFloat64Reference) {
    auto model = Model::load(test::make_tiny_model("m", 32, 1, 2, 2));
    auto& net = model->net();
    auto pos = torch::tensor(std::vector<int64_t>{0, 1, 7, 100, 3000});
    auto [cos, sin] = net.rope().at(pos);
    auto x = torch::randn({5, 16}, torch::kFloat32);
    auto y = detail::RopeTables::apply(x, cos, sin).to(torch::kFloat64);
    for (int64_t r = 0; r < 5; ++r) {
        const double p = static_cast<double>(pos[r].item<int64_t>());
        for (int64_t i = 0; i < 8; ++i) {
            const double f = p / std::pow(10000.0, 2.0 * i / 16);
            const double a = x[r][i].item<double>(), b = x[r][i + 8].item<double>();
            EXPECT_NEAR(y[r][i].item<double>(), a * std::cos(f) - b * std::sin(f), 1e-5);
            EXPECT_NEAR(y[r][i + 8].item<double>(), b * std::cos(f) + a * std::sin(f), 1e-5);
        }
    }
}

TEST(Forward, FullForwardMatchesNaiveFloat64) {
    auto model = Model::load(test::make_tiny_model("m", 64, 3, 4, 4));
    auto ids = some_ids(40, model->config().vocab_size);
    torch::InferenceMode g;
    auto logits = model->net().forward_full(torch::tensor(ids).unsqueeze(0))[0];  // (L, V)
    auto ref = naive_forward(model->config(), model->net().weights(), ids);
    EXPECT_LE(nmse(logits, ref), 1e-10);
}

// The forward's prefix views (the all-rows index, RoPE's tables) are made once per length, by
// whichever forward comes first: made in inference mode, a later training forward still reads
// them, differentiates through them, and gives what a fresh net gives.
TEST(Forward, TrainingAfterAnInferenceForwardOfTheSameLength) {
    const auto dir = test::make_tiny_model("m", 32, 2, 2, 2);
    auto model = Model::load(dir), fresh = Model::load(dir);
    const auto ids = torch::tensor(some_ids(12, model->config().vocab_size, 5)).unsqueeze(0);
    {
        torch::InferenceMode g;
        (void)model->net().forward_full(ids);
    }
    const auto trained = [&](Model& m) {
        auto& wte = m.net().weights().wte;
        wte.requires_grad_(true);
        auto loss = m.net().forward_full(ids).pow(2).mean();
        loss.backward();
        const auto grad = wte.grad().clone();
        wte.requires_grad_(false);
        return std::make_pair(loss.item<double>(), grad);
    };
    const auto [loss, grad] = trained(*model);
    const auto [fresh_loss, fresh_grad] = trained(*fresh);
    EXPECT_EQ(loss, fresh_loss);
    EXPECT_TRUE(torch::equal(grad, fresh_grad));
}

TEST(Forward, GroupedQueryAttentionMatchesNaive) {
    auto model = Model::load(test::make_tiny_model("m", 64, 2, 8, 2));
    ASSERT_EQ(model->config().n_kv_heads, 2);
    auto ids = some_ids(24, model->config().vocab_size, 9);
    torch::InferenceMode g;
    auto logits = model->net().forward_full(torch::tensor(ids).unsqueeze(0))[0];
    EXPECT_LE(nmse(logits, naive_forward(model->config(), model->net().weights(), ids)), 1e-10);
}

// Precision of the fp32 forward (issue #17): the largest logit error against the float64 forward
// of the same weights, on the embedded model and this 259-token input (chat prompt + masks).
// PyTorch's, as `scripts/compare-reference --precision` measures it on this input (PyTorch 2.15 +
// MKL, Fast-dLLM's LLaDA model): 7.0e-5 against a
// true float64 forward, but 2.1e-5 against that model's own `.double()`, which still applies
// RoPE from float32 tables in float32 (rope_full_precision casts q and k to float32), so the RoPE
// rounding cancels out of the comparison. That is the "gap" issue #17 reported (2.8e-5 for
// PyTorch against 1.4e-4 here, each against a different reference); against the same float64
// forward the engine is the more precise: 3.6e-5 (Debian's LibTorch; 3.4e-5 on PyPI's 2.15),
// 2.7e-5 on Debian's since its own attention path (1/sqrt(Dh) applied to q; 4.0e-5 with it in the
// softmax) and row kernels, and the per-head fp32 forward above, in the same libraries, 3.4e-5
// (OpenMP build) or 4.5e-5 (pthreads build). What remains is fp32 accumulation spread over the
// matrix products and the softmax (all of them in float64: 5e-6; no single op dominates). The
// bounds: 1.5x PyTorch's 7.0e-5, the issue's own stricter 1.5x 2.8e-5, and 1.5x the plain forward.
TEST(Forward, Fp32LogitsStayWithinOneAndAHalfTimesPyTorchsErrorOfFloat64) {
    const auto model = Model::load(default_model_dir());
    std::vector<int64_t> ids;
    for (int32_t t : model->tokenizer().encode(model->apply_chat_template(
             "What is 047 + 385? Show the steps and then give the answer.")))
        ids.push_back(t);
    ids.resize(259, model->config().mask_token_id);
    torch::InferenceMode g;
    const auto ref = naive_forward(model->config(), model->net().weights(), ids);  // (L, V)
    auto max_error = [&](const torch::Tensor& t) {
        return (t.to(torch::kFloat64) - ref).abs().max().item<double>();
    };
    const double engine = max_error(model->net().forward_full(torch::tensor(ids).unsqueeze(0))[0]);
    const double plain =
        max_error(naive_forward(model->config(), model->net().weights(), ids, torch::kFloat32));
    std::printf("fp32 max logit error: engine %.3g, plain fp32 forward %.3g\n", engine, plain);
    EXPECT_LE(engine, 1.5 * 7.0e-5) << "PyTorch 2.15 fp32 against a true float64 forward: 7.0e-5";
    EXPECT_LE(engine, 1.5 * 2.8e-5) << "issue #17's PyTorch figure (float32 RoPE in its reference)";
    EXPECT_LE(engine, 1.5 * plain) << "a plain fp32 forward in the same libraries: " << plain;
    EXPECT_GT(engine, 1e-7) << "an fp32 forward that matches float64 exactly measures nothing";
}

// --threads N: OpenBLAS gets N threads; LibTorch's intra-op pool gets them too unless OpenBLAS
// runs its own pthreads pool (scripts/setup selects the OpenMP build, which shares LibTorch's
// pool; PyPI's LibTorch brings its own BLAS).
TEST(Forward, TheThreadCountReachesLibTorchUnlessOpenBlasHasItsOwnPool) {
    const bool own_pool = std::string(blas_threading()) == "pthreads";
    set_thread_count(2);
    EXPECT_EQ(torch::get_num_threads(), own_pool ? 1 : 2) << blas_threading();
    set_thread_count(1);
    EXPECT_EQ(torch::get_num_threads(), 1);
}

// OpenBLAS runs the best kernels this CPU allows, not its SSE3 fallback for CPU models it does
// not know (Debian 12's 0.3.21 on Emerald Rapids chose Prescott), and its products still agree
// with float64 after choose_blas_kernels switched them.
TEST(Forward, OpenBlasRunsTheBestKernelsThisCpuAllowsAndItsProductsHold) {
    const std::string best = best_blas_kernels_for_this_cpu();
    const char* named = std::getenv("OPENBLAS_CORETYPE");
    if (named && best != named) GTEST_SKIP() << "OPENBLAS_CORETYPE=" << named << " was set";
    set_thread_count(1);
    const std::string kernels = blas_kernels();
    if (kernels.empty()) GTEST_SKIP() << "the BLAS is not OpenBLAS (" << blas_threading() << ")";
    if (!best.empty()) {
        EXPECT_NE(kernels, "Prescott") << "on a CPU that runs " << best;
    }
    torch::manual_seed(7);
    const auto a = torch::randn({200, 600}), b = torch::randn({600, 300});  // float32
    const auto product = torch::matmul(a, b);                               // (200, 300): sgemm
    const auto exact = torch::matmul(a.to(torch::kFloat64), b.to(torch::kFloat64));
    const double error = (product.to(torch::kFloat64) - exact).abs().max().item<double>();
    EXPECT_LT(error, 1e-3) << kernels << " kernels";  // sums of 600 products of magnitude ~1
}

// A loaded CPU model keeps W^T rows contiguous for every x @ W^T (OpenBLAS's NN path, which does
// not repack the weights for the few rows of a cached step), with q, k, v in one buffer and the
// MLP's gate and up in another, so that each group is one product; the values are the
// checkpoint's. Weights replaced one by one (training's row-major copy) are multiplied one by
// one, to the same logits.
TEST(Forward, ALoadedCpuModelStoresItsProjectionsColumnMajorAndStacked) {
    const auto dir = test::make_tiny_model("m", 64, 2, 4, 2);
    const auto model = Model::load(dir);
    const auto& w = model->net().weights();
    for (const auto& l : w.layers) {
        for (const auto* t :
             {&l.q_proj, &l.k_proj, &l.v_proj, &l.attn_out, &l.ff_proj, &l.up_proj, &l.ff_out}) {
            EXPECT_EQ(t->stride(0), 1) << t->sizes();
            EXPECT_FALSE(t->is_contiguous()) << t->sizes();
        }
        const auto qkv = detail::stacked_view({&l.q_proj, &l.k_proj, &l.v_proj});
        ASSERT_TRUE(qkv.defined());
        EXPECT_TRUE(torch::equal(qkv, torch::cat({l.q_proj, l.k_proj, l.v_proj})));
        EXPECT_TRUE(detail::stacked_view({&l.ff_proj, &l.up_proj}).defined());
        EXPECT_FALSE(detail::stacked_view({&l.q_proj, &l.v_proj}).defined()) << "not adjacent";
        EXPECT_FALSE(detail::stacked_view({&l.k_proj, &l.q_proj}).defined()) << "out of order";
    }
    EXPECT_TRUE(w.wte.is_contiguous()) << "the embedding's rows are gathered";
    auto file = SafetensorsFile::open(dir / "model.safetensors");
    const auto* info = file->find("model.transformer.blocks.1.q_proj.weight");
    ASSERT_TRUE(info && info->dtype == DType::F32);
    const auto stored =
        torch::from_blob(const_cast<std::byte*>(file->data(*info)), info->shape, torch::kFloat32);
    EXPECT_TRUE(torch::equal(stored, w.layers[1].q_proj));

    auto separate = w;
    separate.for_each([](torch::Tensor& t) { t = t.clone(torch::MemoryFormat::Contiguous); });
    EXPECT_FALSE(detail::stacked_view({&separate.layers[0].q_proj, &separate.layers[0].k_proj,
                                       &separate.layers[0].v_proj})
                     .defined());
    const detail::Transformer unstacked(model->config(), separate, torch::kCPU);
    auto ids = torch::tensor(some_ids(30, model->config().vocab_size)).unsqueeze(0);
    torch::InferenceMode g;
    EXPECT_LE(nmse(unstacked.forward_full(ids), model->net().forward_full(ids)), 1e-12);
}

// bf16 weights and activations (the default on a GPU; here on the CPU, where LibTorch runs the
// same ops): the logits follow the fp32 forward of the same checkpoint to bf16's precision (norms
// and RoPE in float32 as the reference models do), the caches take the weights' type, and a plan
// forward with every row still equals the full forward in bf16.
TEST(Forward, Bf16ForwardFollowsTheFp32OneAndKeepsItsType) {
    const auto dir = test::make_tiny_model("bf16", 64, 3, 4, 2);
    auto fp32 = Model::load(dir);
    LoadOptions o;
    o.dtype = "bf16";
    auto bf16 = Model::load(dir, o);
    EXPECT_EQ(fp32->dtype(), "fp32");
    EXPECT_EQ(bf16->dtype(), "bf16");
    auto ids = torch::tensor(some_ids(30, fp32->config().vocab_size));
    torch::InferenceMode g;
    auto want = fp32->net().forward_full(ids.unsqueeze(0))[0];  // (L, V) float32
    auto got = bf16->net().forward_full(ids.unsqueeze(0))[0];   // (L, V) bfloat16
    EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
    const double error = nmse(got.to(torch::kFloat32), want);
    EXPECT_LE(error, 1e-3) << "bf16 keeps ~3 significant digits";
    EXPECT_GT(error, 0.0) << "the weights were really rounded";
    auto cache = bf16->net().make_cache(30, true);
    EXPECT_EQ(cache[0].k.scalar_type(), torch::kBFloat16);
    detail::RowSet rows;
    auto hidden = run_plan(bf16->net(), ids, cache, rows);
    // Every row through the plan: within bf16's own rounding of the full forward. LibTorch may
    // pick other bf16 kernels for the plan's operands: Debian's 1.13 and PyPI's 2.15 on a Zen 4
    // give the same bits (0 here, 2.7e-5 for `error`), 2.11 on the H200 host's Xeon 1.25e-5. One
    // row of 30 replaced by its neighbour is off by 7.6e-2.
    const auto plan = bf16->net().head(hidden).to(torch::kFloat32);  // (L, V)
    EXPECT_LE(nmse(plan, got.to(torch::kFloat32)), error);
    EXPECT_LE(nmse(plan, want), 1e-3);
    o.dtype = "fp16";
    EXPECT_THROW(Model::load(dir, o), InputError);
}

TEST(Forward, PlanWithEveryRowEqualsFullForward) {
    auto model = Model::load(test::make_tiny_model("m", 64, 3, 4, 2));
    auto& net = model->net();
    auto ids = torch::tensor(some_ids(30, model->config().vocab_size));
    torch::InferenceMode g;
    auto full = net.forward_full(ids.unsqueeze(0))[0];  // (L, V)
    auto cache = net.make_cache(30, false);
    detail::RowSet rows;
    auto hidden = run_plan(net, ids, cache, rows);
    EXPECT_EQ(rows.size(), 30);
    EXPECT_LE(nmse(net.head(hidden), full), 1e-12);
}

TEST(Forward, PartialForwardWithFreshCacheEqualsFullOnItsRows) {
    auto model = Model::load(test::make_tiny_model("m", 64, 3, 4, 4));
    auto& net = model->net();
    const int64_t L = 36;
    auto ids = torch::tensor(some_ids(L, model->config().vocab_size));
    torch::InferenceMode g;
    auto full = net.forward_full(ids.unsqueeze(0))[0];
    auto cache = net.make_cache(L, false);
    detail::RowSet rows;
    run_plan(net, ids, cache, rows);  // fills K/V
    const auto subset = row_set({2, 5, 6, 20, 35});
    auto hidden = run_plan(net, ids, cache, rows, [&](int) {
        detail::LayerPlan p;
        p.all_rows = false;
        p.rows = subset;
        return p;
    });
    EXPECT_EQ(rows.host, subset.host);
    EXPECT_LE(nmse(net.head(hidden), full.index_select(0, subset.device)), 1e-10);
}

// A feature-cache layer (dLLM-Cache's) that computes every row leaves its cached attention and
// FFN outputs equal to what it added to the residual (the cache takes them outright): a second
// forward that recomputes no row, adding those outputs only, gives the first one's hidden, and
// one that recomputes a few rows against them gives the full forward's on those rows.
TEST(Forward, FeatureCacheOfEveryRowServesALaterForwardOfFewOrNoRows) {
    auto model = Model::load(test::make_tiny_model("m", 64, 3, 4, 4));
    auto& net = model->net();
    const int64_t L = 24, D = model->config().d_model;
    auto ids = torch::tensor(some_ids(L, model->config().vocab_size));
    torch::InferenceMode g;
    auto cache = net.make_cache(L, false);
    for (auto& lc : cache) {  // as dLLM-Cache allocates them
        lc.attn_out = torch::zeros({L, D});
        lc.ffn_out = torch::zeros({L, D});
    }
    const auto features = [](detail::RowSet rows, bool all) {
        return [rows = std::move(rows), all](int) {
            detail::LayerPlan p;
            p.feature_cache = true;
            p.write_features = true;
            p.all_rows = all;
            p.rows = rows;
            return p;
        };
    };
    detail::RowSet out_rows;
    const auto first = run_plan(net, ids, cache, out_rows, features({}, true));  // (L, D)
    const auto kept = cache[1].attn_out.clone();
    const auto none = run_plan(net, ids, cache, out_rows, features(row_set({}), false));
    EXPECT_TRUE(torch::equal(cache[1].attn_out, kept));
    EXPECT_LE(nmse(none, first), 1e-12);
    const auto few = row_set({0, 7, 23});
    const auto again = run_plan(net, ids, cache, out_rows, features(few, false));
    EXPECT_LE(nmse(again.index_select(0, few.device), first.index_select(0, few.device)), 1e-10);
}

TEST(Forward, RowSetsThatGrowUseTheHiddenCache) {
    // Elastic-style: few rows at shallow layers, all rows deeper, served by cached layer inputs.
    auto model = Model::load(test::make_tiny_model("m", 64, 4, 4, 4));
    auto& net = model->net();
    const int64_t L = 20;
    auto ids = torch::tensor(some_ids(L, model->config().vocab_size));
    torch::InferenceMode g;
    auto full = net.forward_full(ids.unsqueeze(0))[0];
    auto cache = net.make_cache(L, true);
    detail::RowSet rows;
    run_plan(net, ids, cache, rows, [](int) {
        detail::LayerPlan p;
        p.write_hidden = true;
        return p;
    });
    const auto few = row_set({3, 4});
    auto hidden = run_plan(net, ids, cache, rows, [&](int l) {
        detail::LayerPlan p;
        if (l < 2) {
            p.all_rows = false;
            p.rows = few;
        }
        return p;
    });
    EXPECT_EQ(rows.size(), L);
    EXPECT_LE(nmse(net.head(hidden), full), 1e-10);
}

TEST(Forward, ObserverReceivesAttentionOnlyWhenAsked) {
    auto model = Model::load(test::make_tiny_model("m", 32, 2, 4, 4));
    auto& net = model->net();
    auto ids = torch::tensor(some_ids(12, model->config().vocab_size));
    torch::InferenceMode g;
    auto cache = net.make_cache(12, false);
    detail::RowSet rows;
    std::vector<bool> got(2, false);
    run_plan(
        net, ids, cache, rows,
        [](int l) {
            detail::LayerPlan p;
            p.want_probs = (l == 1);
            return p;
        },
        [&](const detail::LayerResult& r) {
            got[static_cast<size_t>(r.layer)] = r.probs.defined();
            if (r.probs.defined()) {
                EXPECT_EQ(r.probs.sizes(), (std::vector<int64_t>{4, 12, 12}));
                EXPECT_NEAR(r.probs.sum(-1).mean().item<double>(), 1.0, 1e-5);  // rows sum to 1
            }
        });
    EXPECT_FALSE(got[0]);
    EXPECT_TRUE(got[1]);
}

// The CPU attention without a fused op (the column kernel) takes a key head once for the query
// heads that share it, 4 heads x 300 rows here in 10 chunks of 32 rows per head (128 grouped
// rows; the last chunk 12), the chunks split over threads; with the probabilities asked for it
// writes the whole (H, R, L). Both against float64.
TEST(Attention, ChunkedColumnsAndGroupedHeadsEqualTheFloat64Attention) {
    torch::manual_seed(5);
    const int64_t H = 8, Hkv = 2, R = 300, L = 600, Dh = 16;
    auto q = torch::randn({H, R, Dh}) * 2, k = torch::randn({Hkv, L, Dh}) * 2,
         v = torch::randn({Hkv, L, Dh});
    torch::InferenceMode g;
    const auto ref = naive_attention(f64(q), f64(k), f64(v));
    // The (kv head, chunk) items split over threads: one and two give the same rows.
    for (int t : {1, 2}) {
        const ScopedThreads threads(t);
        EXPECT_LE(nmse(detail::attend(q, k, v), ref), 1e-12) << t << " threads";
    }
    // With the probabilities kept (d2Cache, Elastic-Cache, the attention maps): the same rows,
    // and every query head's probabilities, at 1 and 2 threads and under a batch dimension.
    const auto ref_probs = naive_probabilities(f64(q), f64(k));  // (H, R, L)
    for (int t : {1, 2}) {
        const ScopedThreads threads(t);
        torch::Tensor probs;
        EXPECT_LE(nmse(detail::attend(q, k, v, &probs), ref), 1e-12) << t << " threads";
        ASSERT_EQ(probs.sizes(), (std::vector<int64_t>{H, R, L}));
        EXPECT_LE(nmse(probs, ref_probs), 1e-12) << t << " threads";
        EXPECT_LE((probs.sum(-1) - 1).abs().max().item<double>(), 1e-5);
    }
    torch::Tensor batched_probs;
    (void)detail::attend(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), &batched_probs);
    ASSERT_EQ(batched_probs.sizes(), (std::vector<int64_t>{1, H, R, L}));
    EXPECT_LE(nmse(batched_probs[0], ref_probs), 1e-12);
    // Leading batch dimensions (the batched full forward's B) and a single query row.
    auto batched = detail::attend(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0));
    EXPECT_EQ(batched.sizes(), (std::vector<int64_t>{1, R, H * Dh}));
    EXPECT_LE(nmse(batched[0], ref), 1e-12);
    auto one = q.narrow(1, 7, 1);
    EXPECT_LE(nmse(detail::attend(one, k, v), naive_attention(f64(one), f64(k), f64(v))), 1e-12);
    // A cached step's few query rows (20 per head, 80 per kv head: one chunk), with and without
    // the probabilities.
    auto few = q.narrow(1, 7, 20);
    const auto few_ref = naive_attention(f64(few), f64(k), f64(v));
    for (int t : {1, 2}) {
        const ScopedThreads threads(t);
        torch::Tensor probs;
        EXPECT_LE(nmse(detail::attend(few, k, v), few_ref), 1e-12) << t << " threads";
        EXPECT_LE(nmse(detail::attend(few, k, v, &probs), few_ref), 1e-12) << t << " threads";
        EXPECT_LE(nmse(probs, naive_probabilities(f64(few), f64(k))), 1e-12) << t << " threads";
    }
    // Only some query rows' probabilities (Elastic-Cache's window): rows spread over several
    // chunks and 16-row transpose blocks, the first and the last. The rows of the whole, to the
    // bit (the same kernel), and the same out; in float64 LibTorch's ops pick the rows.
    const std::vector<int64_t> some{0, 5, 31, 32, 33, 150, 299};
    const auto picked = torch::tensor(some);
    for (int t : {1, 2}) {
        const ScopedThreads threads(t);
        torch::Tensor all, part;
        const auto out_all = detail::attend(q, k, v, &all);
        const auto out_part = detail::attend(q, k, v, &part, &some);
        ASSERT_EQ(part.sizes(), (std::vector<int64_t>{H, 7, L}));
        EXPECT_TRUE(torch::equal(part, all.index_select(1, picked))) << t << " threads";
        EXPECT_TRUE(torch::equal(out_part, out_all)) << t << " threads";
    }
    torch::Tensor part64;
    (void)detail::attend(f64(q), f64(k), f64(v), &part64, &some);
    EXPECT_LE(nmse(part64, ref_probs.index_select(1, picked)), 1e-20);
}

// One attention input of the head-mean tests: q (H, R, Dh), k and v (Hkv, L, Dh), and where it is.
struct HeadMeanCase {
    torch::Tensor q, k, v;
    int64_t heads, rows, keys;
    std::string at;
};

struct AttentionShape {
    int64_t heads, kv_heads, rows, keys;
};

// body(case) for each shape at every vector width: q, k, v random (heads of 32 values).
void for_attention_cases(uint64_t seed, const std::vector<AttentionShape>& shapes,
                         const std::function<void(const HeadMeanCase&)>& body) {
    const int64_t Dh = 32;
    for (const AttentionShape sh : shapes)
        at_every_vector_width([&](const std::string& vectors) {
            torch::manual_seed(seed);
            HeadMeanCase c{torch::randn({sh.heads, sh.rows, Dh}) * 2,
                           torch::randn({sh.kv_heads, sh.keys, Dh}) * 2,
                           torch::randn({sh.kv_heads, sh.keys, Dh}),
                           sh.heads,
                           sh.rows,
                           sh.keys,
                           std::to_string(sh.heads) + "/" + std::to_string(sh.kv_heads) +
                               " heads, " + std::to_string(sh.rows) + " rows, " +
                               std::to_string(sh.keys) + " keys, " + vectors};
            body(c);
        });
}

// body(case) for each of the head-mean tests' shapes at every vector width: 4 and 2 kv heads (a
// task walks every kv head of its rows), rows around the chunk size (1; 65: 40 + 25; 130 over 2 kv
// heads: 28 a task, 18 in the last; 40 over 1100 keys: 24 + 16, all heads' scores within half an
// L2), 3 heads (a division, not a reciprocal's multiply).
void for_head_mean_cases(uint64_t seed, const std::function<void(const HeadMeanCase&)>& body) {
    for_attention_cases(
        seed, {{4, 4, 65, 439}, {4, 4, 1, 17}, {4, 2, 130, 100}, {3, 3, 20, 33}, {4, 4, 40, 1100}},
        body);
}

// The head mean the attention sums in its own pass (d2Cache's, without the probabilities) is
// head_mean_f32 of the probabilities it would write, to the bit, for_head_mean_cases' shapes at 1
// and 2 threads and at every vector width, with the same output rows and probabilities as the
// attention without it; in float64 (LibTorch's ops) the float64 mean of the probabilities, rounded
// to float32.
TEST(Attention, HeadMeanFromTheAttentionsOwnPassIsTheProbabilitiesMean) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::InferenceMode guard;
    for_head_mean_cases(21, [](const HeadMeanCase& c) {
        const auto &q = c.q, &k = c.k, &v = c.v;
        const auto& at = c.at;
        torch::Tensor plain_probs;
        const auto plain = detail::attend(q, k, v, &plain_probs);
        const auto want = detail::head_mean_f32(plain_probs);  // (R, L) float32
        for (int t : {1, 2}) {
            const ScopedThreads threads(t);
            torch::Tensor mean, probs, mean_only;
            const auto out = detail::attend(q, k, v, &probs, nullptr, &mean);
            ASSERT_EQ(mean.sizes(), (std::vector<int64_t>{c.rows, c.keys})) << at;
            EXPECT_EQ(mean.scalar_type(), torch::kFloat32) << at;
            EXPECT_TRUE(torch::equal(mean, want)) << at << ", " << t << " threads";
            EXPECT_TRUE(torch::equal(probs, plain_probs)) << at << ", " << t << " threads";
            EXPECT_TRUE(torch::equal(out, plain)) << at << ", " << t << " threads";
            EXPECT_TRUE(torch::equal(detail::attend(q, k, v, nullptr, nullptr, &mean_only), plain))
                << at;
            EXPECT_TRUE(torch::equal(mean_only, want)) << at << ", " << t << " threads";
        }
    });
    torch::Tensor probs64, mean64;
    const int64_t Dh = 32;
    const auto q = torch::randn({4, 9, Dh}, torch::kFloat64),
               k = torch::randn({2, 30, Dh}, torch::kFloat64),
               v = torch::randn({2, 30, Dh}, torch::kFloat64);
    (void)detail::attend(q, k, v, &probs64, nullptr, &mean64);
    EXPECT_TRUE(torch::equal(mean64, probs64.mean(0).to(torch::kFloat32)));
}

// Elastic-Cache's reads where the attention keeps its scores (KeptAttention: a few rows of one
// batch): no probabilities written; a kept row's head mean at any key (KeptScores::mean_at) is
// window_head_mean_cpu's over the probabilities, and the window rows' column sums, each kv head's
// part summed from its scores on the thread that ran it, are window_column_sums_cpu's, to the bit,
// at 1 and 2 threads and at every vector width, with the same output rows as without it. Where the
// rows are too many for the scores to be kept (65 rows of one kv head), or d2Cache's head mean is
// asked in the same call, the probabilities come as asked.
TEST(Attention, KeptScoresGiveElasticsHeadMeansAndWindowColumnSums) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::InferenceMode guard;
    for_attention_cases(
        23, {{4, 2, 24, 439}, {4, 4, 40, 1100}, {3, 3, 20, 33}, {4, 4, 1, 17}, {4, 4, 65, 439}},
        [](const HeadMeanCase& c) {
            const auto &q = c.q, &k = c.k, &v = c.v;
            const AttentionShape sh{c.heads, k.size(0), c.rows, c.keys};
            const auto& at = c.at;
            std::vector<int64_t> kept{0};  // ascending rows of q
            for (int64_t r = 9; r < sh.rows; r += 5) kept.push_back(r);
            if (kept.back() != sh.rows - 1) kept.push_back(sh.rows - 1);
            const std::vector<int64_t> window(kept.size() > 1 ? kept.begin() + 1 : kept.begin(),
                                              kept.end());
            const std::vector<int32_t> kept32(kept.begin(), kept.end()),
                window32(window.begin(), window.end());
            const auto P = static_cast<int64_t>(kept.size());
            torch::Tensor probs;
            const auto plain = detail::attend(q, k, v, &probs);  // (H, R, L)
            const cuda::ProbsShape shape{sh.heads, sh.rows, sh.keys};
            auto want_means = torch::empty({P, sh.keys}, torch::kFloat64);
            cuda::window_head_mean_cpu(probs.data_ptr<float>(), shape, kept32.data(), P,
                                       want_means.data_ptr<double>());
            std::vector<double> want_sums(static_cast<size_t>(sh.keys));
            cuda::window_column_sums_cpu(probs.data_ptr<float>(), shape, sh.kv_heads,
                                         window32.data(), static_cast<int64_t>(window.size()),
                                         want_sums.data());
            const bool fits = sh.rows * (sh.heads / sh.kv_heads) <= 64;  // one chunk a kv head
            for (int t : {1, 2}) {
                const ScopedThreads threads(t);
                for (const bool with_f64 : {false, true}) {
                    const std::string where = at + ", " + std::to_string(t) + " threads" +
                                              (with_f64 ? ", with the float64 mean" : "");
                    torch::Tensor kept_probs, f64;
                    detail::KeptAttention reads;
                    reads.window_rows = &window;
                    const auto out = detail::attend(q, k, v, &kept_probs, &kept,
                                                    with_f64 ? &f64 : nullptr, &reads);
                    EXPECT_TRUE(torch::equal(out, plain)) << where;
                    ASSERT_EQ(reads.kept, fits && !with_f64) << where;
                    if (!reads.kept) {
                        EXPECT_TRUE(
                            torch::equal(kept_probs, probs.index_select(1, torch::tensor(kept))))
                            << where;
                        EXPECT_TRUE(reads.window_sums.empty()) << where;
                        continue;
                    }
                    EXPECT_FALSE(kept_probs.defined()) << where;
                    auto means = torch::empty({P, sh.keys}, torch::kFloat64);
                    for (int64_t p = 0; p < P; ++p)
                        for (int64_t j = 0; j < sh.keys; ++j)
                            means.data_ptr<double>()[p * sh.keys + j] = reads.scores.mean_at(p, j);
                    EXPECT_TRUE(torch::equal(means, want_means)) << where;
                    EXPECT_EQ(reads.window_sums, want_sums) << where;
                }
            }
        });
}

// Elastic-Cache's plan (a row subset at every layer, the kept scores of a few rows, a drift test
// that may escalate) reads the same head means and window column sums at every thread count, to
// the bit, and they are the definitions' over the probabilities: at 1 thread from attend's kept
// scores, at 2 and 3 from the scores each kv head's attention kept in few_rows_layer's region (it
// splits by kv heads there and writes no probabilities). The escalate test reads the means during
// the region, observe_layer after it (LayerResult::probs_mean_at). 31 computed rows: two shares of
// the region at 2 threads, three at 3. d_model 128 over 4 heads, 2 kv heads: the heads' columns
// are whole tiles, so the q/k/v pass, the attention and the rest of the layer share a region too.
TEST(Forward, KeptScoresReadTheSameAtEveryThreadCount) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    auto model = Model::load(test::make_tiny_model("m", 128, 2, 4, 2));
    auto& net = model->net();
    const int64_t L = 150, H = model->config().n_heads, Hkv = model->config().n_kv_heads;
    const auto ids = torch::tensor(some_ids(L, model->config().vocab_size));
    std::vector<int64_t> computed, kept;
    for (int64_t r = 1; r < L; r += 5) computed.push_back(r);
    for (size_t i = 0; i < computed.size(); i += 3) kept.push_back(computed[i]);
    const auto P = static_cast<int64_t>(kept.size());
    // Every kept row but the first: the window whose column sums are summed.
    const std::vector<int64_t> summed(kept.begin() + 1, kept.end());
    std::vector<int32_t> summed_rows(summed.size());  // their rows among the kept
    std::iota(summed_rows.begin(), summed_rows.end(), 1);
    const auto subset = row_set(computed);
    torch::InferenceMode g;
    const auto plan = [&](bool kept_scores) {
        return [&, kept_scores](int) {
            detail::LayerPlan p;
            p.all_rows = false;
            p.rows = subset;
            p.want_probs = true;
            p.want_probs_mean = kept_scores;
            p.probs_positions = kept;
            p.window_sum_positions = summed;
            p.write_hidden = true;
            p.may_escalate = true;
            return p;
        };
    };
    const auto read_means = [&](const detail::LayerResult& r) {  // (P, L) float64
        auto read = torch::empty({P, L}, torch::kFloat64);
        for (int64_t p = 0; p < P; ++p)
            for (int64_t j = 0; j < L; ++j)
                read.data_ptr<double>()[p * L + j] = r.probs_mean_at(p, j);
        return read;
    };
    // The definitions over the probabilities, per layer.
    std::vector<torch::Tensor> want_means;
    std::vector<std::vector<double>> want_sums;
    std::vector<torch::Tensor> means[4], tested[4];   // per thread count, per layer: (P, L)
    std::vector<std::vector<double>> column_sums[4];  // per thread count, per layer: (L)
    for (const int t : {0, 1, 2, 3}) {                // 0: the probabilities at 1 thread
        auto [cache, rows] = filled_cache(net, ids);
        const ScopedThreads threads(std::max(t, 1));
        const std::string at = std::to_string(t) + " threads";
        run_plan(
            net, ids, cache, rows, plan(t > 0),
            [&](const detail::LayerResult& r) {
                if (t == 0) {
                    ASSERT_TRUE(r.probs.defined()) << "layer " << r.layer;
                    const auto p = r.probs.contiguous();  // (H, P, L)
                    const cuda::ProbsShape s{H, P, L};
                    std::vector<int32_t> all(static_cast<size_t>(P));
                    std::iota(all.begin(), all.end(), 0);
                    auto m = torch::empty({P, L}, torch::kFloat64);
                    cuda::window_head_mean_cpu(p.data_ptr<float>(), s, all.data(), P,
                                               m.data_ptr<double>());
                    want_means.push_back(m);
                    std::vector<double> sums(static_cast<size_t>(L));
                    cuda::window_column_sums_cpu(p.data_ptr<float>(), s, Hkv, summed_rows.data(),
                                                 static_cast<int64_t>(summed_rows.size()),
                                                 sums.data());
                    want_sums.push_back(sums);
                    return;
                }
                EXPECT_FALSE(r.probs.defined()) << at << ", layer " << r.layer;
                EXPECT_EQ(r.probs_positions, kept) << at << ", layer " << r.layer;
                EXPECT_EQ(r.window_sum_positions, summed) << at << ", layer " << r.layer;
                ASSERT_TRUE(r.probs_mean_at) << at << ", layer " << r.layer;
                means[t].push_back(read_means(r));
                column_sums[t].push_back(r.window_column_sums);
            },
            [&](const detail::LayerResult& r) {  // goes on; keeps what the drift test would read
                if (t == 0) return false;
                EXPECT_TRUE(r.probs_mean_at) << at << ", layer " << r.layer;
                if (r.probs_mean_at) tested[t].push_back(read_means(r));
                return false;
            });
    }
    ASSERT_EQ(want_means.size(), 2U);
    for (const int t : {1, 2, 3}) {
        ASSERT_EQ(means[t].size(), 2U) << t << " threads";
        ASSERT_EQ(tested[t].size(), 2U) << t << " threads";
        for (size_t l = 0; l < 2; ++l) {
            EXPECT_TRUE(torch::equal(means[t][l], want_means[l])) << t << " threads, layer " << l;
            EXPECT_TRUE(torch::equal(tested[t][l], want_means[l]))
                << t << " threads, layer " << l << ": what escalate read";
            EXPECT_EQ(column_sums[t][l], want_sums[l]) << t << " threads, layer " << l;
        }
    }
}

// d2Cache's plan (a row subset at every layer, K/V written, every computed row's float32 head mean
// asked) through row_layer: the head means, the K/V cache and the output rows are the same bits at
// 1, 2 and 3 threads (at 1 the q/k/v pass, then the attention's tasks by chunks of rows through
// every kv head, then the output and MLP; at 2+ each thread its rows through the whole layer in one
// region, few_rows_layer_with_head_mean), and each layer's head mean is head_mean_f32's
// of the probabilities a plan that asks for them gets. 64 computed rows: chunks of 32 (2 heads a kv
// head).
TEST(Forward, HeadMeansOfARowSubsetAreTheSameAtEveryThreadCount) {
    auto model = Model::load(test::make_tiny_model("m", 128, 2, 4, 2));
    auto& net = model->net();
    const int64_t L = 150;
    const auto ids = torch::tensor(some_ids(L, model->config().vocab_size));
    std::vector<int64_t> computed;
    for (int64_t r = 3; r < L && computed.size() < 64; r += 2) computed.push_back(r);
    const auto subset = row_set(computed);
    torch::InferenceMode g;
    const auto plan = [&](bool probs) {
        return [&, probs](int) {
            detail::LayerPlan p;
            p.all_rows = false;
            p.rows = subset;
            p.want_head_mean = !probs;
            p.want_probs = probs;
            return p;
        };
    };
    std::vector<torch::Tensor> want;  // per layer: (R, L) float32
    std::vector<torch::Tensor> means[4], outputs(4);
    std::vector<detail::LayerCache> caches[4];  // per thread count, per layer
    for (const int t : {0, 1, 2, 3}) {          // 0: the probabilities at 1 thread
        auto [cache, rows] = filled_cache(net, ids);
        const ScopedThreads threads(std::max(t, 1));
        outputs[t] =
            run_plan(net, ids, cache, rows, plan(t == 0), [&](const detail::LayerResult& r) {
                if (t == 0) {
                    want.push_back(detail::head_mean_f32(r.probs));
                    return;
                }
                EXPECT_EQ(r.rows ? r.rows->host : std::vector<int64_t>{}, computed)
                    << t << " threads, layer " << r.layer;
                means[t].push_back(r.head_mean);
            });
        caches[t] = cache;
    }
    ASSERT_EQ(want.size(), 2U);
    for (const int t : {1, 2, 3}) {
        ASSERT_EQ(means[t].size(), 2U) << t << " threads";
        for (size_t l = 0; l < 2; ++l)
            EXPECT_TRUE(torch::equal(means[t][l], want[l])) << t << " threads, layer " << l;
        EXPECT_TRUE(torch::equal(outputs[t], outputs[0])) << t << " threads: rows";
        for (size_t l = 0; l < 2; ++l) {
            EXPECT_TRUE(torch::equal(caches[t][l].k, caches[0][l].k))
                << t << " threads, layer " << l;
            EXPECT_TRUE(torch::equal(caches[t][l].v, caches[0][l].v))
                << t << " threads, layer " << l;
        }
    }
}

// Column sums asked for a position whose probabilities the plan does not keep: a clear error
// naming the position, where the region would otherwise read past the mean's rows.
TEST(Forward, ColumnSumsOfARowWithoutProbabilitiesAreRefused) {
    auto model = Model::load(test::make_tiny_model("m", 128, 1, 4, 2));
    auto& net = model->net();
    const int64_t L = 60;
    const auto ids = torch::tensor(some_ids(L, model->config().vocab_size));
    std::vector<int64_t> computed;
    for (int64_t r = 0; r < L; r += 2) computed.push_back(r);
    torch::InferenceMode g;
    auto cache = net.make_cache(L, true);
    detail::RowSet rows;
    run_plan(net, ids, cache, rows);
    const ScopedThreads threads(2);
    try {
        run_plan(net, ids, cache, rows, [&](int) {
            detail::LayerPlan p;
            p.all_rows = false;
            p.rows = row_set(computed);
            p.want_probs = true;
            p.want_probs_mean = true;
            p.probs_positions = {0, 10};
            p.window_sum_positions = {10, 12};
            return p;
        });
        FAIL() << "no error";
    } catch (const std::logic_error& e) {
        EXPECT_NE(std::string(e.what()).find("position 12"), std::string::npos) << e.what();
    }
}

// column_attention of one kv head of g = probs.size(0) query heads: the first `rows` rows of each
// head of q (g, R', Dh) or (R', Dh), k and v (..., L, Dh) contiguous, into out (rows, width >= g
// Dh) and probs (g, rows, L), both contiguous.
void attend_one_kv_head(const torch::Tensor& q, int64_t rows, const torch::Tensor& k,
                        const torch::Tensor& v, const torch::Tensor& out,
                        const torch::Tensor& probs) {
    const int64_t g = probs.size(0), L = k.size(-2), Dh = k.size(-1);
    std::vector<float> scratch(
        static_cast<size_t>(detail::column_attention_scratch(g, rows, L, Dh)), NAN);
    detail::ColumnAttention a;
    a.q = q.data_ptr<float>();
    a.q_head_stride = q.size(-2) * Dh;
    a.q_row_stride = Dh;
    a.k = k.data_ptr<float>();
    a.v = v.data_ptr<float>();
    a.k_row_stride = a.v_row_stride = Dh;
    a.out = out.data_ptr<float>();
    a.out_head_stride = Dh;
    a.out_row_stride = out.size(1);
    a.probs = probs.data_ptr<float>();
    a.probs_head_stride = rows * L;
    a.heads = g;
    a.rows = rows;
    a.keys = L;
    a.head_dim = Dh;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
    detail::column_attention(a, scratch.data());
}

// row_attention's kernel called directly, one kv head: query-row counts around its 8-column
// padding (1, 21 = 3 heads x 7, 22, 33, 124), one key and key counts off its 16-key transpose
// blocks, head sizes with an 8-column tail (40), an 8-column and a scalar one (44) and 128
// (LLaDA-8B's), an output row wider than the heads' (a stride, untouched padding). Its float32
// error may be at most twice that of LibTorch's float32 softmax(q k^T) v on the same input (the
// column sums' order is its own). When written, mean squared / largest error, ours and LibTorch's:
// 17 keys 3.6e-14 / 6.6e-7 and 2.1e-14 / 5.4e-7, 1024 keys 4.8e-13 / 2.3e-6 and 3.9e-13 / 2.3e-6,
// 439 keys (Dh 128) 3.9e-13 / 2.7e-6 and 1.0e-12 / 5.4e-6; with q scaled before the product (as the
// row blocks do) the 17-key case was 5.9e-14 / 1.4e-6, hence the scale on the score differences.
// At every vector width this CPU has (16, 8 and 4 floats: AVX-512, AVX2, SSE2).
TEST(Attention, ColumnKernelEqualsTheFloat64AttentionAtEveryEdge) {
    torch::manual_seed(13);
    torch::InferenceMode guard;
    struct Shape {
        int64_t heads, rows, keys, head_dim;
    };
    for (const Shape sh : {Shape{1, 1, 1, 32}, Shape{3, 7, 17, 40}, Shape{1, 33, 1024, 32},
                           Shape{2, 20, 600, 16}, Shape{1, 22, 594, 44}, Shape{4, 31, 439, 128}})
        at_every_vector_width([&](const std::string& vectors) {
            torch::manual_seed(13);  // every width sees the same inputs
            const int64_t g = sh.heads, R = sh.rows, L = sh.keys, Dh = sh.head_dim;
            const auto q = torch::randn({g, R, Dh}) * 2, k = torch::randn({1, L, Dh}) * 2,
                       v = torch::randn({1, L, Dh});
            const int64_t width = g * Dh + 5;  // 5 floats past the heads in every output row
            auto out = torch::full({R, width}, NAN);
            auto probs = torch::full({g, R, L}, NAN);
            attend_one_kv_head(q, R, k, v, out, probs);
            const auto ref = naive_attention(f64(q), f64(k), f64(v));  // (R, g Dh)
            const auto ours = out.narrow(1, 0, g * Dh);
            const std::string at = std::to_string(g) + " x " + std::to_string(R) + " rows, " +
                                   std::to_string(L) + " keys, Dh " + std::to_string(Dh) + ", " +
                                   vectors;
            EXPECT_LE(nmse(ours, ref), 1e-12) << at;
            const auto libtorch = naive_attention(q, k, v);
            // SSE2's kernel rounds its products and sums apart (no FMA): 2.4x LibTorch's mean
            // squared error on 17 keys when written.
            const double factor = cpu::vector_floats() >= 8 ? 2 : 3;
            EXPECT_LE(nmse(ours, ref), factor * nmse(libtorch, ref) + 1e-20) << at;
            EXPECT_LE((ours - ref).abs().max().item<double>(),
                      factor * (libtorch - ref).abs().max().item<double>() + 1e-7)
                << at;
            EXPECT_TRUE(out.narrow(1, g * Dh, 5).isnan().all().item<bool>()) << at;
            EXPECT_LE(nmse(probs, naive_probabilities(f64(q), f64(k))), 1e-12) << at;
            EXPECT_LE((probs.sum(-1) - 1).abs().max().item<double>(), 1e-5) << at;
        });
}

// A query row's output and probabilities are the same bits whatever other query rows share its
// call: 32 rows (two whole AVX-512 vectors of score columns), their first 22 and 17 (a whole one
// and a half: softmax_half_columns pairs two keys' halves) and 8 (only a half), over key counts
// that leave 0-3 keys past the softmax's rounds of 4, at every vector width this CPU has.
TEST(Attention, EachQueryRowIsTheSameBitsWhateverRowsShareItsCall) {
    torch::InferenceMode guard;
    const int64_t Dh = 32;
    for (const int64_t L : {415, 416, 417, 418})
        at_every_vector_width([&](const std::string& vectors) {
            torch::manual_seed(17);
            const auto q = torch::randn({32, Dh}) * 2, k = torch::randn({L, Dh}) * 2,
                       v = torch::randn({L, Dh});
            // (out (R, Dh), probs (R, L)) of the first R rows of q.
            auto attend_first = [&](int64_t R) {
                auto out = torch::full({R, Dh}, NAN);
                auto probs = torch::full({1, R, L}, NAN);
                attend_one_kv_head(q, R, k, v, out, probs);
                return std::make_pair(out, probs[0]);
            };
            const auto [out_all, probs_all] = attend_first(32);
            for (const int64_t R : {22, 17, 8}) {
                const auto [out, probs] = attend_first(R);
                const std::string at =
                    std::to_string(R) + " of 32 rows, " + std::to_string(L) + " keys, " + vectors;
                EXPECT_TRUE(torch::equal(out, out_all.narrow(0, 0, R))) << at;
                EXPECT_TRUE(torch::equal(probs, probs_all.narrow(0, 0, R))) << at;
            }
        });
}

// Training differentiates through the same function: with gradients on it takes LibTorch's ops
// (the blocked path writes into buffers, which autograd refuses), to the same values.
TEST(Attention, TrainingGetsGradientsThroughIt) {
    torch::manual_seed(6);
    auto q = torch::randn({4, 50, 8}).requires_grad_(), k = torch::randn({2, 60, 8}),
         v = torch::randn({2, 60, 8});
    auto out = detail::attend(q, k, v);
    EXPECT_LE(nmse(out.detach(), naive_attention(f64(q.detach()), f64(k), f64(v))), 1e-12);
    out.sum().backward();
    ASSERT_TRUE(q.grad().defined());
    EXPECT_GT(q.grad().abs().sum().item<double>(), 0.0);
}

// The softmax's exp is a polynomial, not libm's: within 1e-7 relative of exp in double over the
// range a softmax feeds it (x - max <= 0), exactly 1 at 0, tiny and positive far below.
TEST(Attention, SoftmaxExpIsWithinOneUlpOfExp) {
    double worst = 0;
    for (int i = 0; i <= 200000; ++i) {
        const float x = -87.0F * static_cast<float>(i) / 200000.0F;
        const double e = std::exp(static_cast<double>(x));
        worst = std::max(worst, std::fabs(detail::softmax_exp(x) - e) / e);
    }
    EXPECT_LT(worst, 1.0e-7);
    EXPECT_EQ(detail::softmax_exp(0.0F), 1.0F);
    EXPECT_GT(detail::softmax_exp(-1000.0F), 0.0F);
    EXPECT_LT(detail::softmax_exp(-1000.0F), 1e-37F);
}

// RMSNorm's row loop (row_norm_rope) against LibTorch's ops, on rows of a batch.
TEST(RowKernels, RmsNormEqualsLibTorchsOps) {
    torch::manual_seed(8);
    torch::InferenceMode g;
    // 18 rows stay on one thread; 1800 split into tasks when there are two.
    for (int64_t rows : {9, 900})
        for (int t : {1, 2}) {
            const ScopedThreads threads(t);
            auto x = torch::randn({2, rows, 48}) * 3, w = torch::randn({48});
            const auto ref = (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-5)) * w;
            const auto out = detail::rms_norm(x, w, 1e-5);
            EXPECT_LE((out - ref).abs().max().item<double>(), 2e-6) << rows << " rows, " << t;
        }
}

// q, k and v of rows (alone, and in a batch of 2) from separate and from stacked weights (the
// row loop reads the stacked product's columns in place), against LibTorch's split + RoPE ops.
TEST(RowKernels, ProjectedHeadsEqualLibTorchsRopeOfEveryLayout) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::manual_seed(9);
    const int64_t D = 32, H = 4, Hkv = 2, Dh = 8, R = 7;
    detail::LayerWeights w;
    w.q_proj = torch::randn({H * Dh, D});
    w.k_proj = torch::randn({Hkv * Dh, D});
    w.v_proj = torch::randn({Hkv * Dh, D});
    detail::LayerWeights stacked = w;
    auto buffer = torch::empty_strided({(H + 2 * Hkv) * Dh, D}, {1, (H + 2 * Hkv) * Dh});
    buffer.copy_(torch::cat({w.q_proj, w.k_proj, w.v_proj}));
    stacked.q_proj = buffer.narrow(0, 0, H * Dh);
    stacked.k_proj = buffer.narrow(0, H * Dh, Hkv * Dh);
    stacked.v_proj = buffer.narrow(0, (H + Hkv) * Dh, Hkv * Dh);
    ASSERT_TRUE(
        detail::stacked_view({&stacked.q_proj, &stacked.k_proj, &stacked.v_proj}).defined());
    const detail::RopeTables rope(10000.0, Dh, 64, torch::kCPU);
    auto positions = torch::tensor(std::vector<int64_t>{0, 3, 4, 9, 20, 33, 63});
    auto [cos, sin] = rope.at(positions);  // (R, Dh)
    // 3000 rows: heads split over two threads (7 rows stay on one).
    const int64_t long_rows = 3000;
    auto [long_cos, long_sin] = rope.at(torch::arange(long_rows));  // (3000, Dh)
    torch::InferenceMode g;
    const ScopedThreads threads(2);
    for (const auto& x : {torch::randn({R, D}), torch::randn({2, R, D}),
                          torch::randn({long_rows, D}), torch::randn({2, long_rows, D})})
        for (const auto* weights : {&w, &stacked}) {
            const auto& c = x.size(-2) == R ? cos : long_cos;
            const auto& s = x.size(-2) == R ? sin : long_sin;
            const auto heads = detail::project_qkv(*weights, x, c, s, H, Hkv);
            const auto q = detail::RopeTables::apply(
                detail::split_heads(torch::matmul(x, w.q_proj.t()), H), c, s);
            const auto k = detail::RopeTables::apply(
                detail::split_heads(torch::matmul(x, w.k_proj.t()), Hkv), c, s);
            EXPECT_EQ(heads.q.sizes(), q.sizes());
            EXPECT_LE((heads.q - q).abs().max().item<double>(), 1e-5) << x.sizes();
            EXPECT_LE((heads.k - k).abs().max().item<double>(), 1e-5) << x.sizes();
            EXPECT_TRUE(heads.q.is_contiguous()) << "the layout attention multiplies";
        }
}

// linear splits a product of many rows into one product per thread by rows; a product of few rows
// (a cached step's) with a column-major weight runs few_rows_product, split over the threads by
// tiles of 32 columns (504 columns: 15 tiles and 24 left over). Every layout of the weight
// (row-major, column-major) and of x's leading dimensions gives the one product's values.
TEST(RowKernels, LinearSplitByRowsOrColumnsEqualsTheFloat64Product) {
    torch::manual_seed(10);
    torch::InferenceMode g;
    const auto narrow_w = torch::randn({96, 40}), wide_w = torch::randn({504, 256});
    const std::vector<std::pair<torch::Tensor, torch::Tensor>> cases = {
        {torch::randn({5, 40}), narrow_w},       // too few rows: OpenBLAS
        {torch::randn({40, 40}), narrow_w},      // few rows, one thread's work
        {torch::randn({1001, 40}), narrow_w},    // rows
        {torch::randn({3, 300, 40}), narrow_w},  // rows, batched
        {torch::randn({20, 256}), wide_w},       // few rows, tiles split
        {torch::randn({1, 33, 256}), wide_w}};   // few rows, batched
    for (const auto& [x, w] : cases) {
        auto b = torch::randn({w.size(0)});
        auto w_column_major = torch::empty_strided(w.sizes(), {1, w.size(0)}).copy_(w);
        const auto ref = torch::matmul(f64(x), f64(w).t()) + f64(b);
        for (int t : {1, 2}) {
            const ScopedThreads threads(t);
            for (const auto& weight : {w, w_column_major}) {
                const auto y = detail::linear(x, weight, b);
                EXPECT_EQ(y.sizes(), ref.sizes());
                EXPECT_LE((y - ref).abs().max().item<double>(), 1e-3) << x.sizes() << " " << t;
            }
        }
    }
}

// add_linear: residual + x @ W^T into the residual itself on the CPU kernels' path and through
// OpenBLAS's, a new tensor with gradients through it where autograd needs the old residual.
TEST(RowKernels, AddLinearAddsIntoTheResidualUnlessGradientsNeedIt) {
    torch::manual_seed(12);
    const auto w = torch::empty_strided({96, 40}, {1, 96}).copy_(torch::randn({96, 40}));
    const auto panels = detail::panel_copy(w);
    for (int64_t rows : {5, 40, 300}) {
        const auto x = torch::randn({rows, 40}), residual = torch::randn({rows, 96});
        const auto ref = f64(residual) + torch::matmul(f64(x), f64(w).t());
        for (const auto& p : {panels, torch::Tensor()}) {
            torch::InferenceMode g;
            auto h = residual.clone();
            const auto out = detail::add_linear(h, x, w, p);
            EXPECT_TRUE(out.is_same(h)) << rows << " rows: not in place";
            EXPECT_LE((out - ref).abs().max().item<double>(), 1e-4) << rows << " rows";
        }
        auto wg = w.detach().clone().requires_grad_(true);
        auto h = residual.clone();
        const auto out = detail::add_linear(h, x, wg);
        EXPECT_FALSE(out.is_same(h));
        EXPECT_TRUE(torch::equal(h, residual)) << "the residual autograd holds was changed";
        EXPECT_LE((out - ref).abs().max().item<double>(), 1e-4);
        out.sum().backward();
        ASSERT_TRUE(wg.grad().defined());
        EXPECT_LE((f64(wg.grad()) - f64(x).sum(0).expand({96, 40})).abs().max().item<double>(),
                  1e-3);
    }
}

// q (N, 100): few_rows_product and linear against float64 at 1-37 rows (the test below).
void few_rows_product_at_every_row_count(const torch::Tensor& q) {
    const int64_t columns = q.size(0);
    const auto panels = detail::panel_copy(q);  // the same weights in panels
    ASSERT_TRUE(panels.defined());
    for (int64_t rows = 1; rows <= 37; ++rows) {
        const std::string at =
            std::to_string(rows) + " rows, " + std::to_string(columns) + " columns";
        const auto x = torch::randn({rows, 100});
        const auto xt = x.t().contiguous();  // (100, rows)
        const auto ref = torch::matmul(f64(x), f64(q).t());
        torch::Tensor kernel_y;  // x read by rows, the weights in panels
        for (bool transposed : {false, true}) {
            torch::Tensor first;  // W^T read in place; the panel layout must give the same bits
            for (bool panel_layout : {false, true}) {
                auto y = torch::full({rows, columns}, NAN);
                detail::FewRowsProduct p;
                p.x = transposed ? xt.data_ptr<float>() : x.data_ptr<float>();
                p.wt = panel_layout ? panels.data_ptr<float>() : q.data_ptr<float>();
                p.y = y.data_ptr<float>();
                p.rows = rows;
                p.inner = 100;
                p.columns = columns;
                p.ldx = transposed ? 1 : 100;
                p.ldxk = transposed ? rows : 1;
                p.ldw = panel_layout ? 0 : 258;
                p.panel_columns = panel_layout ? detail::few_rows_panel_columns() : 0;
                p.ldy = columns;
                detail::few_rows_product(p, 0, 32);        // a thread's share: the first tile
                detail::few_rows_product(p, 32, columns);  // the rest, the tails too
                EXPECT_LE((y - ref).abs().max().item<double>(), 1e-4)
                    << at << ", transposed " << transposed << ", panels " << panel_layout;
                if (panel_layout) {
                    EXPECT_TRUE(torch::equal(y, first)) << at << ", transposed";
                }
                if (panel_layout && !transposed) kernel_y = y;
                first = y;
                // accumulate: y0 + x @ W, every block of sums added into y0.
                const auto y0 = torch::randn({rows, columns});
                auto sum = y0.clone();
                p.y = sum.data_ptr<float>();
                p.accumulate = true;
                detail::few_rows_product(p, 0, 32);
                detail::few_rows_product(p, 32, columns);
                EXPECT_LE((sum - (f64(y0) + ref)).abs().max().item<double>(), 1e-4)
                    << at << ", accumulated, transposed " << transposed << ", panels "
                    << panel_layout;
            }
        }
        // And through linear: without panels OpenBLAS below 16 rows, with them the kernel for
        // any number of rows (its bits, however the threads split the columns).
        for (int t : {1, 2}) {
            const ScopedThreads threads(t);
            const auto y = detail::linear(x, q);
            EXPECT_LE((y - ref).abs().max().item<double>(), 1e-4) << at << ", " << t << " threads";
            EXPECT_TRUE(torch::equal(detail::linear(x, q, {}, panels), kernel_y))
                << at << ", " << t << " threads";
        }
    }
}

// few_rows_product's edges: every row count up to three full tiles and one row more (tiles of 12
// rows on AVX-512, 6 elsewhere, shared out evenly), every kind of column tile, an inner size that
// is not a multiple of its 64-value blocks, and a weight inside a wider buffer (q of a stacked
// q/k/v, row stride 3x its columns); x read both row-major and transposed (ldxk, as the attention
// reads its probabilities). Called directly and through linear.
TEST(RowKernels, FewRowsProductEqualsTheFloat64ProductAtEveryTileEdge) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::manual_seed(11);
    torch::InferenceMode g;
    // (N, 100) q inside (258, 100) q/k/v stored column-major: q^T (100, N) with row stride 258.
    // Past two 32-column tiles 86 columns leave a 16-column tile and 6 taken one at a time, 94 a
    // 24-column tile (16 + 8) and 6, 72 an 8-column tile (on AVX2 without panels its last 24
    // columns one tile of three vectors and 4 rows, whose bits the panels' tiles must match).
    const auto stacked = torch::empty_strided({258, 100}, {1, 258}).copy_(torch::randn({258, 100}));
    at_every_vector_width([&](const std::string& width) {
        SCOPED_TRACE(width);
        for (const int64_t columns : {86, 94, 72})
            few_rows_product_at_every_row_count(stacked.narrow(0, 0, columns));
    });
}

// The MLP's silu(gate) * up over rows side by side (gate, then up), from a row stride wider than
// both: within a few float32 roundings of float64 everywhere, including gates far past exp's range
// either way.
TEST(RowKernels, SiluTimesUpEqualsTheFloat64Activation) {
    torch::manual_seed(14);
    torch::InferenceMode g;
    const int64_t rows = 7, F = 37, stride = 2 * F + 3;
    auto y = torch::randn({rows, stride}) * 4;
    y[0].narrow(0, 0, 6).copy_(torch::tensor({-100.0F, -88.0F, -20.0F, 0.0F, 20.0F, 100.0F}));
    auto out = torch::full({rows, F}, NAN);
    detail::silu_mul_rows(y.data_ptr<float>(), stride, rows, F, out.data_ptr<float>());
    const auto gate = f64(y.narrow(1, 0, F)), up = f64(y.narrow(1, F, F));
    const auto ref = gate * torch::sigmoid(gate) * up;
    // Below exp's range the exp is taken at -87 (1.6e-38): silu(-100) comes out as -1.6e-36, not
    // -3.7e-42, hence the absolute floor.
    EXPECT_TRUE(((out - ref).abs() <= 1e-6 * ref.abs() + 1e-33).all().item<bool>());
    EXPECT_EQ(out[0][3].item<float>(), 0.0F);
}

// The kernel's sums restart every 64 values of k: on a cached step's MLP down projection (33 rows,
// 352 -> 128) its largest error against float64 is below OpenBLAS's (1.6e-5 and 3.3e-5 when this
// was written; one running sum over k gave 6.0e-5).
TEST(RowKernels, FewRowsProductIsNoLessPreciseThanOpenBlas) {
    torch::manual_seed(12);
    torch::InferenceMode g;
    const auto w = torch::empty_strided({128, 352}, {1, 128}).copy_(torch::randn({128, 352}));
    double ours = 0, blas = 0;
    for (int draw = 0; draw < 10; ++draw) {
        const auto x = torch::randn({33, 352});
        const auto ref = torch::matmul(f64(x), f64(w).t());
        ours = std::max(ours, (detail::linear(x, w) - ref).abs().max().item<double>());
        blas = std::max(blas, (torch::matmul(x, w.t()) - ref).abs().max().item<double>());
    }
    EXPECT_LE(ours, blas);
}

// AVX-512's and AVX2's kernels give the same bits: each column's sums run in the same order in
// both and both fuse their multiply-adds, so a session's tokens recorded on one machine replay on
// the other (PolicyGolden's were recorded on AVX-512 and pass on AVX2). SSE2's kernels (no FMA)
// round differently; the tests above hold them against float64.
TEST(RowKernels, AvxWidthsGiveTheSameBits) {
    if (cpu::vector_floats() < 16)
        GTEST_SKIP() << "needs AVX-512 to compare with AVX2 (this CPU: " << cpu::vector_floats()
                     << "-float vectors)";
    torch::manual_seed(15);
    torch::InferenceMode g;
    const auto q = torch::randn({2, 22, 44}), k = torch::randn({1, 594, 44}),
               v = torch::randn({1, 594, 44});
    std::vector<torch::Tensor> outs, probs;
    for (int floats : {0, 8}) {
        cpu::limit_vector_floats(floats);
        torch::Tensor p;
        outs.push_back(detail::attend(q, k, v, &p));
        probs.push_back(p);
    }
    EXPECT_TRUE(torch::equal(outs[0], outs[1]));
    EXPECT_TRUE(torch::equal(probs[0], probs[1]));
    // Column counts whose last columns are tiles at one width and single columns at the other
    // (94: columns 88-93 one at a time on AVX-512, 92-93 on AVX2), which once summed unfused.
    for (int64_t columns : {94, 1, 7, 12, 30, 45}) {
        const auto w = torch::empty_strided({columns, 300}, {1, columns})
                           .copy_(torch::randn({columns, 300}));  // (N, K) column-major
        const auto x = torch::randn({13, 300});                   // (M, K)
        std::vector<torch::Tensor> products;
        for (int floats : {0, 8}) {
            cpu::limit_vector_floats(floats);
            products.push_back(detail::linear(x, w, {}, detail::panel_copy(w)));  // (M, N)
        }
        EXPECT_TRUE(torch::equal(products[0], products[1])) << columns << " columns";
    }
    cpu::limit_vector_floats(0);
}

// rows_of: a run of rows is a view; other rows on the CPU are index_select's values, copied row
// by row; a row outside the tensor is named, not read.
TEST(RowKernels, RowsOfIsIndexSelectOrAViewOfARun) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::InferenceMode g;
    const auto x = torch::randn({9, 5});
    const std::vector<int64_t> scattered = {0, 2, 3, 8};
    const auto got = detail::rows_of(x, scattered);
    EXPECT_TRUE(torch::equal(got, x.index_select(0, torch::tensor(scattered))));
    EXPECT_NE(got.data_ptr(), x.data_ptr()) << "scattered rows are a copy";
    const auto run = detail::rows_of(x, std::vector<int64_t>{3, 4, 5});
    EXPECT_EQ(run.data_ptr<float>(), x.data_ptr<float>() + 3 * 5) << "a run is a view";
    EXPECT_TRUE(torch::equal(run, x.narrow(0, 3, 3)));
    EXPECT_EQ(detail::rows_of(x, std::vector<int64_t>{}).size(0), 0);
    const auto doubles = x.to(torch::kFloat64);  // not the row kernels': index_select
    EXPECT_TRUE(torch::equal(detail::rows_of(doubles, scattered),
                             doubles.index_select(0, torch::tensor(scattered))));
    try {
        detail::rows_of(x, std::vector<int64_t>{1, 9});
        FAIL() << "no error";
    } catch (const std::out_of_range& e) {
        EXPECT_NE(std::string(e.what()).find("row 9 outside the 9 rows"), std::string::npos)
            << e.what();
    }
}

// token_rows: the embedding rows index_select gives, for scattered and all positions; a token id
// outside the vocabulary is named with its position, not read. longs_on: the values, int64
// (int32 ones widened).
TEST(RowKernels, TokenRowsAreIndexSelectsRows) {
    const test::ScopedKernelSet fast(KernelSet::Fast);  // these kernels against the reference
    torch::InferenceMode g;
    const auto wte = torch::randn({7, 4});  // (V, D)
    const std::vector<int64_t> tokens = {3, 0, 6, 6, 2};
    const auto ids = detail::longs_on(tokens, torch::kCPU);  // (L)
    EXPECT_EQ(ids.scalar_type(), torch::kLong);
    EXPECT_TRUE(torch::equal(ids, torch::tensor(tokens)));
    const auto rows = detail::RowSet::from_host({1, 2, 4}, torch::kCPU);
    EXPECT_TRUE(torch::equal(detail::token_rows(wte, ids, rows),
                             wte.index_select(0, ids.index_select(0, rows.device))));
    const auto all = detail::RowSet::from_host({0, 1, 2, 3, 4}, torch::kCPU);
    EXPECT_TRUE(torch::equal(detail::token_rows(wte, ids, all), wte.index_select(0, ids)));
    const auto doubles = wte.to(torch::kFloat64);  // not the row kernels': index_select
    EXPECT_TRUE(torch::equal(detail::token_rows(doubles, ids, rows),
                             doubles.index_select(0, ids.index_select(0, rows.device))));
    const std::vector<int32_t> narrow_tokens(tokens.begin(), tokens.end());
    EXPECT_TRUE(torch::equal(detail::longs_on(narrow_tokens, torch::kCPU), ids)) << "widened";
    const auto bad = detail::longs_on(std::vector<int64_t>{3, 0, 7, 6, 2}, torch::kCPU);
    try {
        detail::token_rows(wte, bad, rows);
        FAIL() << "no error";
    } catch (const std::out_of_range& e) {
        EXPECT_NE(
            std::string(e.what()).find("token id 7 at position 2 outside the vocabulary of 7"),
            std::string::npos)
            << e.what();
    }
}

TEST(RowKernels, EmptyBufferIsTorchEmptysTensor) {
    const auto same_kind = [](const torch::Tensor& a, const torch::Tensor& b) {
        EXPECT_EQ(a.sizes(), b.sizes());
        EXPECT_EQ(a.scalar_type(), b.scalar_type());
        EXPECT_EQ(a.device(), b.device());
        EXPECT_EQ(a.is_contiguous(), b.is_contiguous());
        EXPECT_EQ(a.is_inference(), b.is_inference());
        EXPECT_EQ(a.requires_grad(), b.requires_grad());
    };
    const auto doubles = torch::TensorOptions().dtype(torch::kFloat64);
    {
        torch::InferenceMode g;  // a forward's buffers: inference tensors, as torch::empty's
        const auto a = detail::empty_buffer({3, 5, 2}, doubles);
        same_kind(a, torch::empty({3, 5, 2}, doubles));
        EXPECT_TRUE(a.is_inference());
        a.fill_(1.5);  // its own memory, written through
        EXPECT_EQ(a.sum().item<double>(), 1.5 * 30);
        same_kind(detail::empty_buffer({0, 4}, doubles), torch::empty({0, 4}, doubles));
    }
    const auto grads = torch::TensorOptions().requires_grad(true);  // torch::empty's own path
    same_kind(detail::empty_buffer({2, 2}, grads), torch::empty({2, 2}, grads));
    same_kind(detail::empty_buffer({4}, torch::kLong), torch::empty({4}, torch::kLong));
    EXPECT_FALSE(detail::empty_buffer({4}, torch::kLong).is_inference());
}

TEST(Forward, FlopCountFollowsRowsAndKeys) {
    ModelConfig c = tiny_config(64, 2, 4, 4);
    c.vocab_size = 100;
    const double full = detail::layer_flops(c, 50, 50), half = detail::layer_flops(c, 25, 50);
    EXPECT_NEAR(half / full, 0.5, 1e-12);  // linear in computed rows for a fixed key count
    EXPECT_DOUBLE_EQ(detail::head_flops(c, 3), 2.0 * 3 * 64 * 100);
}

}  // namespace
}  // namespace cl

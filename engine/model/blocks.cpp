#include "engine/model/blocks.h"

#include "engine/kernels/kernel_choice.h"
#include "engine/kernels/row_activation.h"
#include "engine/kernels/row_attention.h"
#include "engine/kernels/row_gemm.h"
#include "engine/kernels/row_head_mean.h"
#include "engine/kernels/row_norm_rope.h"
#include "engine/model/empty_buffer.h"

#include <ATen/ThreadLocalState.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace cl::detail {

namespace {

// Rows of `width` floats per task of a loop split over LibTorch's threads: about 32K floats, below
// which a second thread costs more than it saves (a cached step's few rows stay on one).
int64_t rows_per_task(int64_t width) {
    return std::max<int64_t>(1, 32768 / std::max<int64_t>(width, 1));
}

// at::parallel_for for loops that call LibTorch ops: OpenMP's workers do not inherit the caller's
// thread-local state (inference mode, grad mode), without which an op writing into an inference
// tensor throws on them.
template <class F>
void parallel_ops_for(int64_t begin, int64_t end, int64_t grain, const F& body) {
    const at::ThreadLocalState caller;
    at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
        const at::ThreadLocalStateGuard guard(caller);
        body(b, e);
    });
}

}  // namespace

bool uses_row_kernels(const torch::Tensor& t) {
    return fast_kernels() && t.device().is_cpu() && t.scalar_type() == torch::kFloat32 &&
           !t.requires_grad();
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    if (uses_row_kernels(x) && uses_row_kernels(weight) && x.is_contiguous() &&
        weight.is_contiguous()) {
        const int64_t D = x.size(-1);
        // empty_buffer, as the layers' buffers: empty_like's own code, met cold at the step's
        // final norm, was 1.1% of the engine thread's samples in Elastic-Cache's cached steps.
        auto out = empty_buffer(x.sizes(), x.options());  // (..., D)
        const float *in = x.data_ptr<float>(), *gain = weight.data_ptr<float>();
        float* dst = out.data_ptr<float>();
        const int64_t rows = x.numel() / std::max<int64_t>(D, 1);
        at::parallel_for(0, rows, rows_per_task(D), [&](int64_t begin, int64_t end) {
            rms_norm_rows(in + begin * D, gain, dst + begin * D, end - begin, D,
                          static_cast<float>(eps));
        });
        return out;
    }
    // In float32 whatever x is (LLaDA's and Dream's own norms do the same for bf16); for a float32
    // x the casts are no-ops.
    auto xf = x.to(torch::kFloat32);
    auto variance = xf.pow(2).mean(-1, /*keepdim=*/true);  // (..., 1)
    return (xf * torch::rsqrt(variance + eps)).to(x.scalar_type()) * weight;
}

namespace {

// Fewest rows worth a thread of their own in a product split by rows.
constexpr int64_t kMinRowsPerThread = 64;
// Products of kMinFewRows to kMaxFewRows rows (a cached step's) run few_rows_product where the
// weight is stored column-major: there OpenBLAS packs its operands at every call for a few dozen
// rows, and splits them over 2 threads by rows that are too few to share. Below kMinFewRows
// (weights not in panels) OpenBLAS keeps them. cachelens-bench-forward's `products` table
// measures both sides of each bound on the machine at hand.
constexpr int64_t kMinFewRows = 16;
constexpr int64_t kMaxFewRows = 2 * kMinRowsPerThread;
// A thread's share of a few-rows product split by columns: at least this many multiply-adds.
constexpr int64_t kMinMacsPerThread = 1 << 19;

// Inner sizes up to this many values keep a 32-column panel of W^T (128 B per value) in L2 while
// every tile of rows reads it, so the forward's products of more rows run the kernel there too.
constexpr int64_t kMaxInnerForManyRows = 512;
// Above this inner size OpenBLAS keeps even a few rows: its blocking outruns the kernel's panels
// there, and the kernel's sum of 64-value blocks drifts further from float64 than OpenBLAS's
// (RowKernels.FewRowsProductEqualsTheFloat64ProductAtEveryTileEdge bounds it).
constexpr int64_t kMaxInnerForFewRows = 1024;

// The one rule of which products few_rows_product takes, by shape. With the weights in panels
// it takes any number of rows: a panel is read in order from memory, which at 1-12 rows is what
// the product's time is. The bounds were set on the embedded models' widths (d_model 128-256);
// at other widths cachelens-bench-forward's `products` table says where they hold.
bool few_rows_fit(int64_t rows, int64_t inner, bool panels) {
    return rows >= (panels ? 1 : kMinFewRows) && inner <= kMaxInnerForFewRows &&
           (rows < kMaxFewRows || inner <= kMaxInnerForManyRows);
}

// Whether w is a weight that few_rows_product can take: column-major (Out, In), for the kernels.
bool row_kernel_weight(const torch::Tensor& w) {
    return w.dim() == 2 && w.stride(0) == 1 && w.size(0) > 0 && uses_row_kernels(w) &&
           w.size(1) <= kMaxInnerForFewRows;
}

// Whether panels (w's panel_copy, or undefined) holds w's weights for the kernel to read.
bool has_panels(const torch::Tensor& w, const torch::Tensor& panels) {
    return panels.defined() && panels.numel() == w.numel();
}

bool uses_few_rows_product(const torch::Tensor& x, const torch::Tensor& w, int64_t rows,
                           const torch::Tensor& panels) {
    return row_kernel_weight(w) && few_rows_fit(rows, w.size(1), has_panels(w, panels)) &&
           uses_row_kernels(x) && x.is_contiguous();
}

// few_rows_product's operands for out (M, N) = x (M, K) @ w^T, w (N, K) column-major (w^T's rows
// are w's columns), read from the tensors' strides (w.t() would be a view built per product).
FewRowsProduct few_rows_operands(const torch::Tensor& out, const torch::Tensor& x,
                                 const torch::Tensor& w, const torch::Tensor& panels) {
    FewRowsProduct p;
    p.x = x.data_ptr<float>();
    p.wt = w.data_ptr<float>();
    p.y = out.data_ptr<float>();
    p.rows = x.size(0);
    p.inner = x.size(1);
    p.columns = w.size(0);
    p.ldx = x.stride(0);
    p.ldw = w.stride(1);
    p.ldy = out.stride(0);
    if (has_panels(w, panels)) {
        p.wt = panels.data_ptr<float>();
        p.ldw = 0;
        p.panel_columns = few_rows_panel_columns();
    }
    return p;
}

// out (M, Out) = (or += where accumulate) x2 (M, In) @ w^T with w (Out, In) column-major, so w^T
// (In, Out) has unit column stride: tiles of 32 output columns split over LibTorch's threads.
void few_rows_into(const torch::Tensor& out, const torch::Tensor& x2, const torch::Tensor& w,
                   const torch::Tensor& panels, bool accumulate) {
    const int64_t M = x2.size(0), K = x2.size(1), N = w.size(0);
    auto p = few_rows_operands(out, x2, w, panels);
    p.accumulate = accumulate;
    if (M >= kMaxFewRows) {  // many rows: each thread its share of the rows, every column
        const int64_t threads = at::get_num_threads();
        const int64_t grain = std::max(kMinRowsPerThread, (M + threads - 1) / threads);
        at::parallel_for(0, M, grain, [&](int64_t begin, int64_t end) {
            auto share = p;
            share.x += begin * p.ldx;
            share.y += begin * p.ldy;
            share.rows = end - begin;
            few_rows_product(share, 0, N);
        });
        return;
    }
    const int64_t tiles = (N + kFewRowsTileColumns - 1) / kFewRowsTileColumns;
    const int64_t tile_macs = std::max<int64_t>(1, M * K * kFewRowsTileColumns);
    const int64_t grain = std::max<int64_t>(1, (kMinMacsPerThread + tile_macs - 1) / tile_macs);
    at::parallel_for(0, tiles, grain, [&](int64_t begin, int64_t end) {
        few_rows_product(p, begin * kFewRowsTileColumns, std::min(N, end * kFewRowsTileColumns));
    });
}

torch::Tensor few_rows_linear(const torch::Tensor& x2, const torch::Tensor& w,
                              const torch::Tensor& panels) {
    auto out = empty_buffer({x2.size(0), w.size(0)}, x2.options());  // (M, Out)
    few_rows_into(out, x2, w, panels, /*accumulate=*/false);
    return out;
}

// x (M, In) @ wt (In, Out) as one product per thread, each on its share of x's rows, where there
// are threads and rows enough. OpenBLAS's own split of these short products (In and Out of a few
// hundred) spent more in its copies, zeroing and barriers than in the products at 2 threads (perf,
// a 1024-token forward); inside a parallel region its OpenMP build runs each on the calling
// thread.
bool splits_by_rows(const torch::Tensor& x, const torch::Tensor& w, int64_t rows) {
    return uses_row_kernels(x) && uses_row_kernels(w) && x.is_contiguous() &&
           at::get_num_threads() >= 2 && !at::in_parallel_region() && rows >= 2 * kMinRowsPerThread;
}

torch::Tensor matmul_split_rows(const torch::Tensor& x2, const torch::Tensor& wt) {
    const int64_t M = x2.size(0), N = wt.size(1);
    auto out = empty_buffer({M, N}, x2.options());  // (M, Out)
    const int64_t threads = at::get_num_threads();
    const int64_t grain = std::max(kMinRowsPerThread, (M + threads - 1) / threads);
    parallel_ops_for(0, M, grain, [&](int64_t begin, int64_t end) {
        auto o = out.narrow(0, begin, end - begin);
        at::mm_out(o, x2.narrow(0, begin, end - begin), wt);
    });
    return out;
}

}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                     const torch::Tensor& panels) {
    const int64_t in = x.size(-1), rows = x.numel() / std::max<int64_t>(in, 1);
    auto shape = x.sizes().vec();  // (..., In) -> (..., Out)
    shape.back() = w.size(0);
    torch::Tensor y;  // (..., Out)
    if (uses_few_rows_product(x, w, rows, panels)) {
        // Views only where x is not already (rows, In): each is a tensor built per product.
        y = x.dim() == 2 ? few_rows_linear(x, w, panels)
                         : few_rows_linear(x.view({rows, in}), w, panels).view(shape);
    } else if (splits_by_rows(x, w, rows)) {
        y = matmul_split_rows(x.view({rows, in}), w.t()).view(shape);
    } else {
        y = torch::matmul(x, w.t());
    }
    return b.defined() ? y + b : y;
}

torch::Tensor add_linear(torch::Tensor residual, const torch::Tensor& x, const torch::Tensor& w,
                         const torch::Tensor& panels) {
    if (residual.requires_grad() || x.requires_grad() || w.requires_grad())
        return residual + linear(x, w, {}, panels);
    const int64_t in = x.size(-1), rows = x.numel() / std::max<int64_t>(in, 1);
    if (uses_few_rows_product(x, w, rows, panels) && uses_row_kernels(residual) &&
        residual.is_contiguous() && residual.numel() == rows * w.size(0)) {
        few_rows_into(residual.view({rows, w.size(0)}), x.view({rows, in}), w, panels,
                      /*accumulate=*/true);
        return residual;
    }
    return residual.add_(linear(x, w, {}, panels));
}

torch::Tensor panel_copy(const torch::Tensor& w) {
    if (!row_kernel_weight(w)) return {};
    const auto wt = w.t();  // (In, Out), unit column stride
    auto panels = torch::empty({w.numel()}, w.options());
    pack_panels(wt.data_ptr<float>(), wt.size(0), wt.size(1), wt.stride(0),
                panels.data_ptr<float>());
    return panels;
}

RopeTables::RopeTables(double theta, int64_t head_dim, int64_t max_positions,
                       torch::Device device) {
    // inv_freq = 1 / theta^(arange(0, Dh, 2) / Dh) in float64.
    auto idx = torch::arange(0, head_dim, 2, torch::TensorOptions().dtype(torch::kFloat64));
    m_inv_freq = (1.0 / torch::pow(theta, idx / static_cast<double>(head_dim))).to(device);
    std::tie(m_cos, m_sin) =
        at(torch::arange(max_positions, torch::TensorOptions().dtype(torch::kLong).device(device)));
}

std::pair<torch::Tensor, torch::Tensor> RopeTables::at(const torch::Tensor& positions) const {
    // positions (T) -> freqs (T, Dh/2) -> emb (T, Dh) = cat(freqs, freqs)
    auto freqs = positions.to(torch::kFloat64).unsqueeze(1) * m_inv_freq.unsqueeze(0);
    auto emb = torch::cat({freqs, freqs}, -1);
    return {emb.cos().to(torch::kFloat32), emb.sin().to(torch::kFloat32)};
}

std::pair<torch::Tensor, torch::Tensor> RopeTables::prefix(int64_t L) const {
    if (L <= m_cos.size(0)) return {m_cos.narrow(0, 0, L), m_sin.narrow(0, 0, L)};
    return at(torch::arange(L, torch::TensorOptions().dtype(torch::kLong).device(m_cos.device())));
}

torch::Tensor RopeTables::apply(const torch::Tensor& x, const torch::Tensor& cos,
                                const torch::Tensor& sin) {
    // rotate_half splits Dh into halves: [-x2, x1] (NeoX style).
    const int64_t half = x.size(-1) / 2;
    auto x1 = x.narrow(-1, 0, half);
    auto x2 = x.narrow(-1, half, half);
    auto rotated = torch::cat({-x2, x1}, -1);
    // The tables are float32: a bf16 x is rotated in float32 and rounded once (a float32 x is
    // unchanged by the casts).
    return (x.to(torch::kFloat32) * cos + rotated.to(torch::kFloat32) * sin).to(x.scalar_type());
}

torch::Tensor split_heads(const torch::Tensor& t, int64_t n) {
    auto shape = t.sizes().vec();
    const int64_t dh = shape.back() / n;
    shape.back() = n;
    shape.push_back(dh);
    return t.view(shape).transpose(-3, -2);
}

torch::Tensor stacked_view(std::initializer_list<const torch::Tensor*> parts) {
    const auto& first = **parts.begin();
    if (first.dim() != 2 || first.stride(0) != 1) return {};
    const int64_t ld = first.stride(1), in = first.size(1);
    int64_t rows = 0;
    for (const auto* p : parts) {
        // Each part must begin where the previous one ends, in the same column-major buffer.
        const bool adjacent = p->dim() == 2 && p->size(1) == in && p->stride(0) == 1 &&
                              p->stride(1) == ld && p->scalar_type() == first.scalar_type() &&
                              p->storage().is_alias_of(first.storage()) &&
                              p->storage_offset() == first.storage_offset() + rows;
        if (!adjacent) return {};
        rows += p->size(0);
    }
    if (rows > ld) return {};
    return first.as_strided({rows, in}, {1, ld});  // (sum Out_i, In)
}

namespace {

// x @ [q; k; v]^T (+ biases): one product where the three share a buffer, three otherwise.
std::array<torch::Tensor, 3> qkv_rows(const LayerWeights& w, const torch::Tensor& x) {
    const auto stacked = stacked_view({&w.q_proj, &w.k_proj, &w.v_proj});
    if (!stacked.defined())
        return {linear(x, w.q_proj, w.q_bias), linear(x, w.k_proj, w.k_bias),
                linear(x, w.v_proj, w.v_bias)};
    const auto bias = w.q_bias.defined() ? torch::cat({w.q_bias, w.k_bias, w.v_bias}) : w.q_bias;
    auto y = linear(x, stacked, bias, w.qkv_panels);  // (..., R, (H + 2 Hkv) Dh)
    const int64_t nq = w.q_proj.size(0), nk = w.k_proj.size(0);
    return {y.narrow(-1, 0, nq), y.narrow(-1, nq, nk), y.narrow(-1, nq + nk, nk)};
}

// y (..., R, n*Dh) with unit column stride -> (..., n, R, Dh) rotated: one loop over the rows
// (rope_rows) where it can read y in place, LibTorch's ops otherwise.
torch::Tensor rotate_heads(const torch::Tensor& y, const torch::Tensor& cos,
                           const torch::Tensor& sin, int64_t n) {
    const int64_t R = y.size(-2), Dh = y.size(-1) / n;
    const int64_t batches = y.dim() == 3 ? y.size(0) : 1;
    const bool rows_in_place = y.stride(-1) == 1 && (y.dim() == 2 || y.dim() == 3);
    if (!uses_row_kernels(y) || !rows_in_place || !cos.is_contiguous() || !sin.is_contiguous() ||
        cos.scalar_type() != torch::kFloat32 || cos.size(0) != R)
        return RopeTables::apply(split_heads(y, n), cos, sin);
    auto shape = y.sizes().vec();  // (..., R, n*Dh) -> (..., n, R, Dh)
    shape.back() = Dh;
    shape.insert(shape.end() - 2, n);
    auto out = empty_buffer(shape, y.options());
    // Tasks of whole heads: head h reads columns h*Dh.. of y and writes out's (R, Dh) block h.
    at::parallel_for(0, batches * n, rows_per_task(R * Dh), [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end;) {
            const int64_t b = item / n, h0 = item % n, h1 = std::min(n, h0 + (end - item));
            RopeRows in;
            in.x = y.data_ptr<float>() + (y.dim() == 3 ? b * y.stride(0) : 0) + h0 * Dh;
            in.row_stride = y.stride(-2);
            in.cos = cos.data_ptr<float>();
            in.sin = sin.data_ptr<float>();
            in.rows = R;
            in.heads = h1 - h0;
            in.head_dim = Dh;
            rope_rows(in, out.data_ptr<float>() + (b * n + h0) * R * Dh);
            item += h1 - h0;
        }
    });
    return out;
}

}  // namespace

QkvHeads project_qkv(const LayerWeights& w, const torch::Tensor& x, const torch::Tensor& cos,
                     const torch::Tensor& sin, int64_t heads, int64_t kv_heads) {
    auto [q, k, v] = qkv_rows(w, x);
    QkvHeads out;
    out.q = rotate_heads(q, cos, sin, heads);
    out.k = rotate_heads(k, cos, sin, kv_heads);
    out.v = split_heads(v, kv_heads);
    return out;
}

namespace {

// Query rows per task of attend_columns: a kv head's g * R rows in chunks of at most this many,
// so that the (L, rows) scores stay in L2 and a few kv heads still make tasks for every thread:
// 64, not 128, because a 512 KB L2 (AMD EPYC) cannot hold 128 rows' scores at 1024 keys, while a
// 1 MB one runs 64 as fast as any larger chunk; fewer rows than 64 gain nothing
// (cachelens-bench-forward --lengths 439,1024 measures the forward these chunks carry).
constexpr int64_t kColumnChunkRows = 64;
// Probabilities read per task of head_mean_f32's loops: fewer are not worth a thread.
constexpr int64_t kHeadMeanFloatsPerTask = 32768;
// Scores of every head kept per task where the attention makes the head mean: half of a 1 MB L2.
constexpr int64_t kMeanTaskScoreFloats = 131072;

// Floats between two kv heads' scratches where column_head_mean reads them afterwards (its
// padding past column_attention_scratch's, rounded to 16 floats): a chunk of `rows` query rows.
int64_t mean_scratch_stride(int64_t g, int64_t rows, int64_t L, int64_t Dh) {
    return (column_attention_scratch(g, rows, L, Dh) + kColumnHeadMeanPadding + 15) / 16 * 16;
}

// The Hkv scratches from base, stride floats apart, in kv-head order.
std::vector<const float*> scratches_from(const float* base, int64_t Hkv, int64_t stride) {
    std::vector<const float*> out;
    out.reserve(static_cast<size_t>(Hkv));
    for (int64_t n = 0; n < Hkv; ++n) out.push_back(base + n * stride);
    return out;
}

// The most query rows of a task that takes every head of its rows (the head mean from the scores,
// which every head's scores must stay for): at most kColumnChunkRows / g rows, and few enough that
// all heads' scores stay within kMeanTaskScoreFloats (at least 8 rows: one column vector).
int64_t most_rows_per_mean_task(int64_t R, int64_t H, int64_t g, int64_t L) {
    const int64_t fit = std::max<int64_t>(8, kMeanTaskScoreFloats / std::max<int64_t>(H * L, 1));
    return std::max<int64_t>(1, std::min({R, kColumnChunkRows / g, fit}));
}

// Query rows per task of attend's head-mean attention: as many tasks as threads, of at most
// most_rows_per_mean_task rows. Rounded up to whole padded columns (kColumnPadding) within that
// most, so that only the last task pads: d2Cache's 66 rows at one thread went 33 + 33 (80 columns
// a head) and now go 40 + 26 (72), 236 -> 213 us for 4 kv heads over 439 keys; the largest task's
// columns are the same either way.
int64_t rows_per_mean_task(int64_t R, int64_t H, int64_t g, int64_t L) {
    const int64_t most = most_rows_per_mean_task(R, H, g, L);
    const int64_t tasks =
        std::max((R + most - 1) / most, std::min<int64_t>(at::get_num_threads(), R));
    const int64_t even = (R + tasks - 1) / tasks;
    const int64_t whole = (g * even + kColumnPadding - 1) / kColumnPadding * kColumnPadding / g;
    return std::max(even, std::min(whole, most));
}

// The kept scores' attention (KeptAttention): each kv head's task into its own scratch, its part of
// the window's column sums from there on the thread that ran it. At one thread the float32 head
// mean of the kept rows, summed in the attention's pass, was 0.7-2.7% faster than writing their
// probabilities for Elastic-Cache's steps; keeping the scores writes neither.
torch::Tensor attend_keeping_scores(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, const std::vector<int64_t>* probs_rows,
                                    KeptAttention& kept) {
    const ColumnAttentionTasks call(q, k, v, probs_rows, true, kept.window_rows);
    at::parallel_for(0, call.Hkv, 1, [&](int64_t first, int64_t last) {
        for (int64_t n = first; n < last; ++n) call.run(0, n, 0);
    });
    kept.kept = true;
    kept.scores = call.kept_scores();
    kept.window_sums = call.window_column_sums();
    return call.result(nullptr);
}

// The CPU attention by row_attention's kernel: each kv head's g * R query rows in chunks against
// every key, written straight into the (..., R, H*Dh) rows the output projection reads (and into
// the (..., H, R, L) probabilities where they are asked for). One chunk per task over LibTorch's
// threads, each thread with its own scratch. Not row blocks of OpenBLAS products and a row softmax:
// those pack the keys at every call and take a pass per score row (row_attention.h).
// With head_mean_out each task takes a chunk of rows through every kv head, each into its own
// scratch, and then sums their probabilities there into the chunk's rows of the (R, L) float32
// head mean, so the (H, R, L) probabilities are never written and read back.
torch::Tensor attend_columns(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             torch::Tensor* probs_out, const std::vector<int64_t>* probs_rows,
                             torch::Tensor* head_mean_out, KeptAttention* kept) {
    if (kept && probs_rows && !head_mean_out && ColumnAttentionTasks::keeps_scores_for(q, k))
        return attend_keeping_scores(q, k, v, probs_rows, *kept);
    const ColumnAttentionTasks call(q, k, v, probs_out != nullptr, probs_rows);
    const int64_t H = call.H, Hkv = call.Hkv, g = call.g, R = call.R, L = call.L;
    const int64_t batches = call.batches;
    torch::Tensor mean;  // (B, R, L) float32
    if (head_mean_out) {
        mean = empty_buffer({batches, R, L}, q.options());
        const int64_t rc = rows_per_mean_task(R, H, g, L), chunks = (R + rc - 1) / rc;
        at::parallel_for(0, batches * chunks, 1, [&](int64_t begin, int64_t end) {
            for (int64_t item = begin; item < end; ++item) {
                const int64_t b = item / chunks, r0 = item % chunks * rc;
                call.run_with_head_mean(b, r0, std::min(R, r0 + rc),
                                        mean.data_ptr<float>() + (b * R + r0) * L);
            }
        });
    } else {
        const int64_t chunks = call.chunks();
        at::parallel_for(0, batches * Hkv * chunks, 1, [&](int64_t begin, int64_t end) {
            for (int64_t item = begin; item < end; ++item)
                call.run(item / (Hkv * chunks), item / chunks % Hkv, item % chunks);
        });
    }
    auto shape = q.sizes().vec();  // (..., H, R, Dh) -> (..., R, L)
    shape.erase(shape.end() - 3);
    shape.back() = L;
    if (head_mean_out) *head_mean_out = mean.view(shape);  // (..., R, L)
    return call.result(probs_out);
}

}  // namespace

namespace {

// The calling thread's buffer number Which, grown to n floats at least and kept for the thread's
// life.
template <int Which>
float* thread_buffer(size_t n) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < n) buffer.resize(n);
    return buffer.data();
}

// ColumnAttentionTasks' kept scores: the calling thread's, apart from thread_scratch, which the
// q/k/v pass and the MLP use in the same region.
float* kept_scores_buffer(size_t n) {
    return thread_buffer<1>(n);
}

}  // namespace

// A vector per task was zeroed each time (320 KB for a 128-row chunk over 594 keys) and, past
// malloc's mmap threshold, had its pages faulted in again at every layer.
float* thread_scratch(size_t n) {
    return thread_buffer<0>(n);
}

ColumnAttentionTasks::ColumnAttentionTasks(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                           const torch::Tensor& v_in, bool want_probs,
                                           const std::vector<int64_t>* probs_rows)
    : q(q_in.contiguous()),  // no copies in a forward: its q, k, v are contiguous
      k(k_in.contiguous()),
      v(v_in.contiguous()),
      H(q.size(-3)),
      Hkv(k.size(-3)),
      g(H / Hkv),
      R(q.size(-2)),
      L(k.size(-2)),
      Dh(q.size(-1)),
      P(probs_rows ? static_cast<int64_t>(probs_rows->size()) : R),
      batches(q.numel() / (H * R * Dh)),
      scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)))) {
    // The output and the probabilities in the shapes result() hands over: a view made there
    // cost a dispatcher call each (2-3 us of the midpoint of a cached Elastic layer at 2 threads,
    // where the other thread waits).
    auto shape = q.sizes().vec();  // (..., H, R, Dh) -> (..., R, H*Dh)
    shape.erase(shape.end() - 3);
    shape.back() = H * Dh;
    out = empty_buffer(shape, q.options());
    if (probs_rows) {  // slot[r]: the row of the kept probabilities that query row r fills, or -1
        slot.assign(static_cast<size_t>(R), -1);
        for (size_t i = 0; i < probs_rows->size(); ++i)
            slot[static_cast<size_t>((*probs_rows)[i])] = static_cast<int64_t>(i);
    }
    if (want_probs) {
        auto probs_shape = q.sizes().vec();  // (..., H, R, Dh) -> (..., H, P, L)
        probs_shape.back() = L;
        probs_shape[probs_shape.size() - 2] = P;
        probs = empty_buffer(probs_shape, q.options());
    }
}

ColumnAttentionTasks::ColumnAttentionTasks(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                           const torch::Tensor& v_in,
                                           const std::vector<int64_t>* probs_rows, bool keep,
                                           const std::vector<int64_t>* window_rows)
    : ColumnAttentionTasks(q_in, k_in, v_in, !(keep && keeps_scores_for(q_in, k_in)), probs_rows) {
    if (probs.defined()) return;
    keep_scores();
    if (window_rows && !window_rows->empty()) {
        for (int64_t r : *window_rows)
            if (r < 0 || r >= R || (!slot.empty() && slot[static_cast<size_t>(r)] < 0))
                throw std::invalid_argument("ColumnAttentionTasks: window row " +
                                            std::to_string(r) + " is not a kept row of " +
                                            std::to_string(R));
        m_window_rows = *window_rows;
        m_window_sums.assign(static_cast<size_t>(Hkv * L), 0.0);
    }
}

bool ColumnAttentionTasks::keeps_scores_for(const torch::Tensor& q, const torch::Tensor& k) {
    if (q.dim() != 3 || k.dim() != 3 || k.size(0) == 0) return false;
    const int64_t g = q.size(0) / k.size(0);  // (H, R, Dh), (Hkv, L, Dh)
    return g > 0 && q.size(1) * g <= kColumnChunkRows;
}

void ColumnAttentionTasks::keep_scores() {
    m_kept_stride = mean_scratch_stride(g, R, L, Dh);
    m_kept = kept_scores_buffer(static_cast<size_t>(Hkv * m_kept_stride));
    m_scratches = scratches_from(m_kept, Hkv, m_kept_stride);
    m_kept_rows.resize(static_cast<size_t>(P));
    for (int64_t r = 0; r < R; ++r) {
        const int64_t p = slot.empty() ? r : slot[static_cast<size_t>(r)];
        if (p >= 0) m_kept_rows[static_cast<size_t>(p)] = r;
    }
}

KeptScores ColumnAttentionTasks::kept_scores() const {
    if (!m_kept) throw std::logic_error("ColumnAttentionTasks: no scores kept");
    return {m_scratches, m_kept_rows, g, R, L, Dh};
}

std::vector<double> ColumnAttentionTasks::window_column_sums() const {
    std::vector<double> sums;  // (L)
    if (m_window_sums.empty()) return sums;
    sums.assign(static_cast<size_t>(L), 0.0);
    for (int64_t n = 0; n < Hkv; ++n) {
        const double* part = m_window_sums.data() + n * L;
        for (int64_t c = 0; c < L; ++c) sums[static_cast<size_t>(c)] += part[c];
    }
    return sums;
}

double KeptScores::mean_at(int64_t p, int64_t key) const {
    ColumnAttention a;  // the sizes column_head_mean_f32_at reads
    a.heads = g;
    a.rows = R;
    a.keys = L;
    a.head_dim = Dh;
    return column_head_mean_f32_at(a, scratches.data(), static_cast<int64_t>(scratches.size()),
                                   rows[static_cast<size_t>(p)], key);
}

ColumnAttention ColumnAttentionTasks::at(int64_t b, int64_t n, int64_t r0, int64_t rows) const {
    ColumnAttention a;
    a.q = q.data_ptr<float>() + ((b * H + n * g) * R + r0) * Dh;  // (g, R, Dh)
    a.q_head_stride = R * Dh;
    a.q_row_stride = Dh;
    a.k = k.data_ptr<float>() + (b * Hkv + n) * L * Dh;  // (L, Dh)
    a.v = v.data_ptr<float>() + (b * Hkv + n) * L * Dh;
    a.k_row_stride = a.v_row_stride = Dh;
    a.out = out.data_ptr<float>() + (b * R + r0) * H * Dh + n * g * Dh;  // head j at column j Dh
    a.out_head_stride = Dh;
    a.out_row_stride = H * Dh;
    if (probs.defined()) {  // (g, P, L): row r0 + r at r0 + r, or at its slot
        a.probs = probs.data_ptr<float>() + ((b * H + n * g) * P + (slot.empty() ? r0 : 0)) * L;
        a.probs_head_stride = P * L;
        if (!slot.empty()) a.probs_slot = slot.data() + r0;
    }
    a.heads = g;
    a.rows = rows;
    a.keys = L;
    a.head_dim = Dh;
    a.scale = scale;
    return a;
}

int64_t ColumnAttentionTasks::chunk_rows() const {
    return std::max<int64_t>(1, std::min(R, kColumnChunkRows / g));
}

int64_t ColumnAttentionTasks::chunks() const {
    return (R + chunk_rows() - 1) / chunk_rows();
}

void ColumnAttentionTasks::run(int64_t b, int64_t n, int64_t c) const {
    if (m_kept) {  // batch 1, one chunk: kv head n's own scratch
        const ColumnAttention a = at(0, n, 0, R);
        float* scratch = m_kept + n * m_kept_stride;
        column_attention(a, scratch);
        if (!m_window_rows.empty())
            column_window_sums(a, scratch, m_window_rows.data(),
                               static_cast<int64_t>(m_window_rows.size()),
                               m_window_sums.data() + n * L);
        return;
    }
    const int64_t rc = chunk_rows();
    float* scratch = thread_scratch(static_cast<size_t>(column_attention_scratch(g, rc, L, Dh)));
    column_attention(at(b, n, c * rc, std::min(rc, R - c * rc)), scratch);
}

void ColumnAttentionTasks::run_with_head_mean(int64_t b, int64_t r0, int64_t r1,
                                              float* mean) const {
    const int64_t most = most_rows_per_mean_task(R, H, g, L);
    const int64_t pieces = (r1 - r0 + most - 1) / most, rc = (r1 - r0 + pieces - 1) / pieces;
    // A scratch per kv head, each left holding its scores for column_head_mean.
    const int64_t region = mean_scratch_stride(g, rc, L, Dh);
    float* scratch = thread_scratch(static_cast<size_t>(Hkv * region));
    const auto scratches = scratches_from(scratch, Hkv, region);
    for (int64_t c0 = r0; c0 < r1; c0 += rc) {
        const int64_t rows = std::min(rc, r1 - c0);
        ColumnAttention a;
        for (int64_t n = 0; n < Hkv; ++n) {
            a = at(b, n, c0, rows);
            column_attention(a, scratch + n * region);
        }
        column_head_mean(a, scratches.data(), Hkv, mean + (c0 - r0) * L);
    }
}

torch::Tensor ColumnAttentionTasks::result(torch::Tensor* probs_out) const {
    if (probs_out && probs.defined()) *probs_out = probs;
    return out;
}

// Where attend_columns runs: the fast kernels only (kernel_choice.h); LibTorch 2.x has its fused
// attention instead, another device or dtype keeps LibTorch's ops, and so does training (the kernel
// writes into buffers, which autograd cannot follow).
bool uses_column_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
    return TORCH_VERSION_MAJOR < 2 && fast_kernels() && q.device().is_cpu() &&
           q.scalar_type() == torch::kFloat32 && q.size(-2) > 0 && k.size(-2) > 0 &&
           !q.requires_grad() && !k.requires_grad() && !v.requires_grad();
}

torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     torch::Tensor* probs_out, const std::vector<int64_t>* probs_rows,
                     torch::Tensor* head_mean_out, KeptAttention* kept) {
    if (uses_column_attention(q, k, v))
        return attend_columns(q, k, v, probs_out, probs_rows, head_mean_out, kept);
    const int64_t H = q.size(-3), Hkv = k.size(-3), Dh = q.size(-1);
    auto keys = k, values = v;  // (..., Hkv, L, Dh)
    if (Hkv != H) {
        keys = k.repeat_interleave(H / Hkv, -3);  // (..., H, L, Dh)
        values = v.repeat_interleave(H / Hkv, -3);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
    torch::Tensor out;  // (..., R, H, Dh)
#if TORCH_VERSION_MAJOR >= 2
    // LibTorch 2.x (PyPI's): its fused attention does not hold the (R, L) scores when nobody asks
    // for them (cachelens-bench-forward times it against sequence length). LibTorch 1.13 has no
    // such op.
    if (!probs_out && !head_mean_out)
        out = at::scaled_dot_product_attention(q, keys, values, {}, 0.0, false, scale)
                  .transpose(-3, -2);
#endif
    if (!out.defined()) {
        auto probs =
            torch::softmax(torch::matmul(q, keys.transpose(-2, -1)) * scale, -1);  // (..., H, R, L)
        if (probs_out)  // (..., H, R or P, L)
            *probs_out = probs_rows
                             ? probs.index_select(-2, torch::tensor(*probs_rows).to(probs.device()))
                             : probs;
        if (head_mean_out) *head_mean_out = head_mean_f32(probs);  // (..., R, L)
        out = torch::matmul(probs, values).transpose(-3, -2);
    }
    auto shape = out.sizes().vec();
    shape.pop_back();
    shape.back() = H * Dh;
    return out.reshape(shape);  // (..., R, H*Dh)
}

torch::Tensor head_mean_f32(const torch::Tensor& probs) {
    if (!uses_row_kernels(probs) || probs.dim() < 3)
        return probs.mean(-3).to(torch::kFloat32);  // a GPU's, bf16's: the mean in their type
    const auto p = probs.contiguous();              // (..., H, R, L)
    const int64_t H = p.size(-3), R = p.size(-2), L = p.size(-1), batches = p.numel() / (H * R * L);
    auto shape = p.sizes().vec();
    shape.erase(shape.end() - 3);
    auto mean = empty_buffer(shape, p.options());  // (..., R, L) float32
    // Rows split over the threads (when this was d2Cache's own pass, 4% of its step on one core;
    // at 2 threads the other core waited for the main thread's: split, 2.7% faster, paired steps).
    const int64_t rows_per_task =
        std::max<int64_t>(1, kHeadMeanFloatsPerTask / std::max<int64_t>(H * L, 1));
    for (int64_t b = 0; b < batches; ++b)
        at::parallel_for(0, R, rows_per_task, [&](int64_t begin, int64_t end) {
            head_mean_rows(p.data_ptr<float>() + b * H * R * L, H, R, L, begin, end,
                           mean.data_ptr<float>() + b * R * L);
        });
    return mean;
}

torch::Tensor gated_mlp(const LayerWeights& w, const torch::Tensor& x,
                        const torch::Tensor& residual) {
    // The down projection, added to the residual where there is one.
    const auto down = [&](const torch::Tensor& hidden, const torch::Tensor& panels) {
        return residual.defined() ? add_linear(residual, hidden, w.ff_out, panels)
                                  : detail::linear(hidden, w.ff_out, {}, panels);
    };
    torch::Tensor gate, up;  // (..., F)
    if (const auto stacked = stacked_view({&w.ff_proj, &w.up_proj}); stacked.defined()) {
        auto y = detail::linear(x, stacked, {}, w.gate_up_panels);  // (..., 2F): one product
        const int64_t F = w.ff_proj.size(0);
        if (uses_row_kernels(y) && y.is_contiguous()) {
            auto shape = y.sizes().vec();
            shape.back() = F;
            auto h = empty_buffer(shape, y.options());  // (..., F)
            const int64_t rows = y.numel() / (2 * F);
            const float* in = y.data_ptr<float>();
            float* out = h.data_ptr<float>();
            at::parallel_for(0, rows, rows_per_task(2 * F), [&](int64_t begin, int64_t end) {
                silu_mul_rows(in + begin * 2 * F, 2 * F, end - begin, F, out + begin * F);
            });
            return down(h, w.ff_out_panels);
        }
        gate = torch::silu(y.narrow(-1, 0, F));
        up = y.narrow(-1, F, F);
    } else {
        gate = torch::silu(detail::linear(x, w.ff_proj));
        up = detail::linear(x, w.up_proj);
    }
    return down(gate * up, {});  // (..., D)
}

}  // namespace cl::detail

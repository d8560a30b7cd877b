// The transformer blocks every architecture assembles, written once: RMSNorm, linear layers with
// optional bias, NeoX rotary embeddings, attention with grouped-query heads, the gated MLP.
// Internal to the engine: includes <torch/torch.h>.
//
// Shapes: L keys, R query rows, D d_model, H heads, Hkv kv heads, Dh head dim, F mlp hidden,
// "..." any leading batch dimensions (none in the plan forward, B in the batched full forward).
#pragma once

#include <torch/torch.h>

#include "engine/kernels/row_attention.h"

#include <initializer_list>
#include <utility>

namespace cl::detail {

// The weights of one decoder layer. Biases are undefined for architectures without them.
struct LayerWeights {
    torch::Tensor attn_norm;  // (D)
    torch::Tensor q_proj;     // (H*Dh, D)
    torch::Tensor k_proj;     // (Hkv*Dh, D)
    torch::Tensor v_proj;     // (Hkv*Dh, D)
    torch::Tensor q_bias;     // (H*Dh) or undefined
    torch::Tensor k_bias;     // (Hkv*Dh) or undefined
    torch::Tensor v_bias;     // (Hkv*Dh) or undefined
    torch::Tensor attn_out;   // (D, H*Dh)
    torch::Tensor ff_norm;    // (D)
    torch::Tensor ff_proj;    // (F, D) gate, through SiLU
    torch::Tensor up_proj;    // (F, D)
    torch::Tensor ff_out;     // (D, F)
    // The CPU row kernels' copies of the products' weights in panel layout (panel_copy), where
    // few_rows_product runs them; undefined elsewhere. Derived at load, not checkpoint tensors.
    torch::Tensor qkv_panels;       // of stacked_view(q, k, v)
    torch::Tensor gate_up_panels;   // of stacked_view(gate, up)
    torch::Tensor attn_out_panels;  // of attn_out
    torch::Tensor ff_out_panels;    // of ff_out
};

// Where the row kernels (row_norm_rope, row_gemm, few_rows_layer) and the row loops replace
// LibTorch's ops: the fast kernels chosen (kernel_choice.h), float32 tensors on the CPU without
// gradients (training differentiates through LibTorch's). The one gate of every CPU fast path.
bool uses_row_kernels(const torch::Tensor& t);

// x (..., D) -> (..., D): x * rsqrt(mean(x^2) + eps) * weight, in float32.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// x (..., In) @ w^T (+ b): (..., Out). w (Out, In); b (Out) or undefined; panels w's
// panel_copy or undefined.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b = {},
                     const torch::Tensor& panels = {});

// residual (..., Out) + x (..., In) @ w^T: the residual stream's add fused into the product. In
// residual itself where no gradient needs its old value (the row kernels then add each block of
// the product's sums straight into it: no (..., Out) temporary, no pass over both to add them);
// a new tensor otherwise.
torch::Tensor add_linear(torch::Tensor residual, const torch::Tensor& x, const torch::Tensor& w,
                         const torch::Tensor& panels = {});

// w (Out, In) column-major, stored for the CPU row kernels -> its weights in few_rows_product's
// panel layout (row_gemm.h: each few_rows_panel_columns() output columns' (In, width) block
// contiguous), (Out * In) float32; undefined where linear never runs few_rows_product on w. A
// cached step reads its weights from L3 or memory (other rows' K/V and activations push them out
// of L2 between layers); W^T read as 32-column strips is a strided stream there, a panel a
// sequential one (scratch harness, 6 layers' products of 32 rows with 8 MB read between layers:
// 28.7 -> 41.8 GMAC/s; with nothing read between: 43.6 -> 49.8).
torch::Tensor panel_copy(const torch::Tensor& w);

// Rotary tables of positions 0..max-1, computed once per model in float64 (as LLaDA's
// rope_full_precision) and stored as float32 on the model's device.
class RopeTables {
public:
    RopeTables() = default;
    RopeTables(double theta, int64_t head_dim, int64_t max_positions, torch::Device device);
    // positions (T) int64 -> cos, sin (T, Dh)
    std::pair<torch::Tensor, torch::Tensor> at(const torch::Tensor& positions) const;
    // cos, sin (L, Dh) of positions 0..L-1: views of the stored tables when they reach that far.
    std::pair<torch::Tensor, torch::Tensor> prefix(int64_t L) const;
    // x (..., T, Dh) rotated NeoX style (halves) with tables (T, Dh).
    static torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin);

private:
    torch::Tensor m_inv_freq;    // (Dh/2) float64
    torch::Tensor m_cos, m_sin;  // (max_positions, Dh) float32
};

// (..., R, n*Dh) -> (..., n, R, Dh)
torch::Tensor split_heads(const torch::Tensor& t, int64_t n);

// Matrices (Out_i, In) stored column-major one after another in one buffer (as
// TransformerWeights::store_projections_column_major lays out q, k, v and the MLP's gate and up)
// as one (sum Out_i, In) view, so that x @ view^T is one product; undefined when they are not.
torch::Tensor stacked_view(std::initializer_list<const torch::Tensor*> parts);

// Query, key and value heads of the rows in x, RoPE applied to q and k.
struct QkvHeads {
    torch::Tensor q;  // (..., H, R, Dh)
    torch::Tensor k;  // (..., Hkv, R, Dh)
    torch::Tensor v;  // (..., Hkv, R, Dh)
};
// x (..., R, D) normalised inputs; cos, sin (R, Dh) of the rows' positions.
QkvHeads project_qkv(const LayerWeights& w, const torch::Tensor& x, const torch::Tensor& cos,
                     const torch::Tensor& sin, int64_t heads, int64_t kv_heads);

// The calling thread's scratch of at least n floats, kept between calls (the attention's scores,
// the fused few-rows layer's rows). Valid until the thread's next call: no caller holds it across
// a call that takes it too.
float* thread_scratch(size_t n);

// The float32 head mean (engine/cuda/elastic_drift.h's) of the query rows whose scores a
// ColumnAttentionTasks kept, read from the scores where they lie. Valid until the thread that made
// the tasks makes the next that keep scores (the next layer's attention): it outlasts the tasks, so
// that Elastic-Cache reads its tracked keys after the layer without the probabilities written.
struct KeptScores {
    std::vector<const float*> scratches;  // (Hkv) kv head n's scores and sums
    std::vector<int64_t> rows;            // (P) the query row of each kept row
    int64_t g = 0, R = 0, L = 0, Dh = 0;  // query heads per kv head, query rows, keys, head size
    // Kept row p's head mean at one key.
    double mean_at(int64_t p, int64_t key) const;
};

// What attend keeps where it keeps the scores instead of writing the probabilities.
struct KeptAttention {
    // In: query rows (ascending indices into R, kept rows) whose column sums it adds up (Elastic-
    // Cache's window), or null.
    const std::vector<int64_t>* window_rows = nullptr;
    bool kept = false;  // out: whether it kept the scores (else the probabilities came as asked)
    KeptScores scores;  // out: the kept rows' head means
    // out (L): the window rows' column sums (ColumnAttentionTasks::window_column_sums), or empty.
    std::vector<double> window_sums;
};

// The one attention implementation: softmax(q k^T / sqrt(Dh)) v over every key, kv heads shared
// by H / Hkv query heads. q (..., H, R, Dh), k and v (..., Hkv, L, Dh) -> (..., R, H*Dh) before the
// output projection; the probabilities (..., H, R, L) go to *probs_out when it is given, only the
// P query rows of probs_rows (ascending indices into R) when that is given too: (..., H, P, L).
// With head_mean_out: the probabilities' float32 head mean (..., R, L) of every query row too
// (head_mean_f32's bits), which the CPU kernel sums in its own pass without writing them.
// With kept and probs_rows, where ColumnAttentionTasks can keep the scores (a few rows of one
// batch on the CPU kernel) and no head mean is asked: no probabilities, the scores kept instead
// (KeptAttention), and *probs_out stays as it was; elsewhere the probabilities come as without it.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     torch::Tensor* probs_out = nullptr,
                     const std::vector<int64_t>* probs_rows = nullptr,
                     torch::Tensor* head_mean_out = nullptr, KeptAttention* kept = nullptr);

// attend()'s CPU column kernel (row_attention.h) taken apart: the operands, the output's and the
// probabilities' memory, and one task per query-row chunk of a kv head (its H / Hkv query heads),
// for attend's own parallel region and for a caller that runs a kv head's attention in a region of
// its own (few_rows_qkv_attention: each thread its kv heads' q/k/v pass, then their attention).
struct ColumnAttentionTasks {
    // q (..., H, R, Dh), k and v (..., Hkv, L, Dh) where uses_column_attention; allocates the
    // output and, with want_probs, the probabilities of every query row, or of probs_rows' rows
    // only (ascending indices into R).
    ColumnAttentionTasks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         bool want_probs, const std::vector<int64_t>* probs_rows);
    // With keep_scores where keeps_scores_for(q, k) (one batch, each kv head's rows one chunk):
    // no probabilities written; each kv head's task leaves its scores in a scratch of its own (the
    // calling thread's, kept_scores_buffer), which kept_scores() reads afterwards. Elsewhere the
    // probabilities, as with want_probs. Elastic-Cache's cached layers at 2 threads, where each
    // thread takes a share of the kv heads and no pass sees every head of a row: writing the
    // probabilities took 3.2 us of each kv head's 20.6 (16 rows over 415 keys). With window_rows
    // (ascending indices into R, each one of probs_rows' rows): each kv head's task then also sums
    // its part of those rows' column sums from its own scores (row_attention.h's
    // column_window_sums), on the thread that ran it; window_column_sums() adds the parts.
    ColumnAttentionTasks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const std::vector<int64_t>* probs_rows, bool keep_scores,
                         const std::vector<int64_t>* window_rows = nullptr);
    static bool keeps_scores_for(const torch::Tensor& q, const torch::Tensor& k);
    bool keeps_scores() const { return m_kept != nullptr; }
    // The kept rows' head means, read from the kept scores (valid as KeptScores says). Where
    // scores are kept.
    KeptScores kept_scores() const;
    // (L) float64: the window rows' column sums, engine/cuda/elastic_drift.h's
    // window_column_sums_cpu over the probabilities (the same bits): the kv heads' parts added from
    // 0.0 in kv head order. After every task ran; empty without window rows.
    std::vector<double> window_column_sums() const;
    // Kv head n of batch b, query rows [r0, r0 + rows), into out (and probs).
    ColumnAttention at(int64_t b, int64_t n, int64_t r0, int64_t rows) const;
    // Query rows per chunk, and chunks per kv head: a chunk's scores fit a core's L2.
    int64_t chunk_rows() const;
    int64_t chunks() const;
    // Chunk c of kv head n of batch b, on the calling thread (in its thread_scratch).
    void run(int64_t b, int64_t n, int64_t c) const;
    // Query rows [r0, r1) of batch b through every kv head, on the calling thread (in its
    // thread_scratch), and their float32 head mean (column_head_mean, head_mean_f32's bits) into
    // mean (r1 - r0, L): in chunks few enough that every head's scores stay in L2 together. The
    // head-mean attention's task (attend's, and a thread's rows in
    // few_rows_layer_with_head_mean).
    void run_with_head_mean(int64_t b, int64_t r0, int64_t r1, float* mean) const;
    // attend's result (..., R, H*Dh); where the probabilities were wanted they go to *probs_out
    // as (..., H, P, L).
    torch::Tensor result(torch::Tensor* probs_out) const;

    torch::Tensor q, k, v;      // contiguous: (B, H, R, Dh), (B, Hkv, L, Dh)
    torch::Tensor out;          // (..., R, H*Dh): B blocks of (R, H*Dh) in memory
    torch::Tensor probs;        // (..., H, P, L), or undefined
    std::vector<int64_t> slot;  // query row -> its row of probs, -1: none; empty: row r at r
    int64_t H, Hkv, g, R, L, Dh, P, batches;
    float scale;  // 1 / sqrt(Dh)

private:
    void keep_scores();
    float* m_kept = nullptr;  // Hkv scratches of m_kept_stride floats, or null
    int64_t m_kept_stride = 0;
    std::vector<const float*> m_scratches;      // (Hkv) into m_kept
    std::vector<int64_t> m_kept_rows;           // (P) the query row of each kept row
    std::vector<int64_t> m_window_rows;         // (W) query rows whose column sums are summed
    mutable std::vector<double> m_window_sums;  // (Hkv, L): kv head n's part in row n
};

// Whether attend takes the column kernel for these operands: LibTorch 1.x (2.x has its own fused
// attention), float32 on the CPU, no gradients.
bool uses_column_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// probs (..., H, R, L) -> (..., R, L) float32: on the CPU in float32 row_head_mean.h's head mean
// (the float32 sum over the heads in order, divided by H); elsewhere the mean in probs' own type,
// then float32.
torch::Tensor head_mean_f32(const torch::Tensor& probs);

// The gated MLP: ff_out(silu(ff_proj x) * up_proj x). x (..., D) -> (..., D); with a residual
// (..., D), residual + that, by add_linear (in place where it may be).
torch::Tensor gated_mlp(const LayerWeights& w, const torch::Tensor& x,
                        const torch::Tensor& residual = {});

}  // namespace cl::detail

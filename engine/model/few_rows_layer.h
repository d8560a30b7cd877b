// A cached step's layer for its few rows on the CPU, the ops between two exchanges of rows fused:
// each thread runs its own share of the rows through norm, products, bias, RoPE and the K/V
// cache writes (before the attention), or through the output projection and the whole MLP (after
// it), in one parallel region: not one region per op, because at a cached step's few rows a
// region's fork and join, and every op's inputs crossing to the other core and back, cost more
// than the op. At 2 threads or more the q/k/v pass instead gives each thread a share of the kv
// heads for every row, where the heads' columns are whole tiles: each thread reads only its heads'
// weights and writes the q, k, v its own attention tasks read (attend splits by kv heads the same
// way). Where the attention follows on attend's column kernel, the two then run in one region
// (few_rows_qkv_attention). cachelens-bench-steps measures each variant's cached layer and its
// phases (`--threads 2`); docs/architecture.md, "The cached step on the CPU", gives the rationale.
// The feature-cache layer's variant (few_rows_features) writes the rows' outputs into the cached
// features instead. The sums are the op-by-op path's: the same kernels on the same rows
// (few_rows_product's order of summation does not depend on the rows or columns a call takes), so
// the results are equal bit for bit (FewRowsLayer tests).
//
// Shapes: R computed rows, D d_model, H heads, Hkv kv heads, Dh head dim, F mlp hidden, L keys.
#pragma once

#include "engine/model/blocks.h"
#include "engine/model/layer_plan.h"

#include <functional>
#include <optional>
#include <vector>

namespace cl::detail {

// Whether the fused path takes a layer of these weights for the rows h (R, D): float32 on the
// CPU without gradients, every product's weights in panels, few enough rows; and kv_cache (where
// the fresh K/V are to go) contiguous float32 on the CPU.
bool fits_few_rows_layer(const LayerWeights& w, const torch::Tensor& h, const LayerCache* kv_cache);

// The rows' q (H, R, Dh) and k (Hkv, R, Dh) after RoPE and v (Hkv, R, Dh), of norm(h) with
// attn_norm. cos, sin (R, Dh) of the rows' positions. With kv_cache, the fresh k and v also go
// into its k and v (Hkv, L, Dh) at `positions` (R, each in [0, L)).
QkvHeads few_rows_qkv(const LayerWeights& w, const torch::Tensor& h, const torch::Tensor& cos,
                      const torch::Tensor& sin, int64_t heads, int64_t kv_heads, double eps,
                      LayerCache* kv_cache, const std::vector<int64_t>& positions);

// Whether few_rows_qkv_attention takes the rows h (R, D) of a layer with this K/V cache: at 2
// threads or more, heads whose columns are whole tiles, and the attention on attend's column
// kernel; with fits_few_rows_layer(w, h, &kv_cache) as well.
bool fuses_qkv_and_attention(const torch::Tensor& h, const LayerCache& kv_cache, int64_t heads,
                             int64_t kv_heads);

// few_rows_qkv into kv_cache and then attend(q, kv_cache.k, kv_cache.v, probs_out, probs_rows) in
// one parallel region: each thread takes its share of the kv heads through both, and no thread
// waits for another between them, since a kv head's attention reads only the q, k and v its own
// pass wrote and the cache rows of earlier steps. One region where there were two (a fork and a
// join less per layer); the same bits as the two calls.
struct QkvAttention {
    QkvHeads qkv;        // the rows' fresh q, k, v, as few_rows_qkv's
    torch::Tensor attn;  // (R, H*Dh), as attend's
};
QkvAttention few_rows_qkv_attention(const LayerWeights& w, const torch::Tensor& h,
                                    const torch::Tensor& cos, const torch::Tensor& sin,
                                    int64_t heads, int64_t kv_heads, double eps,
                                    LayerCache& kv_cache, const std::vector<int64_t>& positions,
                                    torch::Tensor* probs_out,
                                    const std::vector<int64_t>* probs_rows);

// How few_rows_layer hands its attention to the caller between the attention and the output
// projection.
struct LayerMidpoint {
    // On the calling thread after the attention, once: false ends the layer there (the caller
    // takes it on another way). Empty: the layer goes on.
    std::function<bool()> go_on;
    // Whether the other threads may run their rows' output and MLP before go_on answers. Where it
    // stops the layer h's rows are then partly through the layer, not as they came in: only where
    // the caller starts the layer again from another copy of its input.
    bool rows_before_go_on = false;
    // Where the layer's input rows are kept (Elastic-Cache's hidden cache, (L, D) float32
    // contiguous on the CPU): h's row r goes to its row positions[r] at the start of the output
    // and MLP phase, each thread its own rows before it changes them, whether or not the layer
    // goes on. On the calling thread before the region, the 22 rows' copy took 1.6 us of a cached
    // layer at 2 threads, while the other thread waited. Undefined: none kept.
    torch::Tensor keep_inputs;
    // Where the caller reads the probabilities only as their float32 head mean at a few keys: the
    // attention keeps each kv head's scores instead of writing the probabilities, where it can
    // (ColumnAttentionTasks' keep_scores), and hands them to this on the calling thread before
    // go_on (FewRowsLayerResult::kept has them too). Empty: the probabilities as asked.
    std::function<void(const KeptScores&)> scores;
    // With scores: the query rows (ascending indices into h's rows, each one of probs_rows) whose
    // column sums each kv head's share sums from its own scores after its attention
    // (FewRowsLayerResult::window_sums). Null or empty: none.
    const std::vector<int64_t>* window_rows = nullptr;
};

struct FewRowsLayerResult {
    QkvHeads qkv;           // the rows' fresh q, k, v
    torch::Tensor attn;     // (R, H*Dh)
    bool finished = false;  // the output projection and MLP ran: h is the layer's output
    // Where the scores were kept (LayerMidpoint::scores): the kept rows' head means, and the
    // window rows' column sums (ColumnAttentionTasks::window_column_sums; empty without them).
    std::optional<KeptScores> kept;
    std::vector<double> window_sums;
};

// few_rows_qkv_attention, then the midpoint (go_on() on the calling thread), then (where it goes
// on) few_rows_output_and_mlp, in one region (run_in_phases) with one barrier after the attention,
// where there were two regions: a fork and a join less per layer, the same bits. With
// rows_before_go_on the other threads do not wait for go_on after the barrier: they run their rows
// while the calling thread runs go_on first, so that Elastic-Cache's drift test overlaps the
// other thread's work instead of being a phase both wait for. Where fuses_qkv_and_attention(h,
// kv_cache, heads, kv_heads) holds. The output projection and MLP stay split by rows, not by
// columns: split by columns the residual rows and the MLP's hidden values would cross the cores
// at each of two more barriers. d2Cache's layers (attend with head means: tasks of rows through
// every head) take few_rows_layer_with_head_mean below instead.
FewRowsLayerResult few_rows_layer(const LayerWeights& w, const torch::Tensor& h,
                                  const torch::Tensor& cos, const torch::Tensor& sin, int64_t heads,
                                  int64_t kv_heads, double eps, LayerCache& kv_cache,
                                  const std::vector<int64_t>& positions, torch::Tensor* probs_out,
                                  const std::vector<int64_t>* probs_rows,
                                  const LayerMidpoint& midpoint);

// Whether few_rows_layer_with_head_mean takes the rows h (R, D) of a layer with this K/V cache:
// at 2 threads or more, rows enough for two shares, the attention on attend's column kernel; with
// fits_few_rows_layer(w, h, &kv_cache) as well.
bool fuses_layer_with_head_mean(const torch::Tensor& h, const LayerCache& kv_cache);

// A whole layer whose attention makes the float32 head mean (d2Cache's), of a layer that always
// goes on and keeps no inputs: each thread its share of the rows through norm, q/k/v of every
// head, RoPE and the cache writes, then (after one barrier: every fresh K/V row is in the cache)
// the same rows' attention through every head with their head mean, output projection and MLP,
// in place in h. Each row stays on one core from the layer's input to its output: only the fresh
// K/V rows cross the cores (not three regions: two forks and joins more, and q and the residual
// rows would cross too). The same bits as few_rows_qkv, attend with head_mean_out and
// few_rows_output_and_mlp.
struct HeadMeanLayer {
    QkvHeads qkv;             // the rows' fresh q, k, v
    torch::Tensor attn;       // (R, H*Dh)
    torch::Tensor head_mean;  // (R, L) float32
};
HeadMeanLayer few_rows_layer_with_head_mean(const LayerWeights& w, const torch::Tensor& h,
                                            const torch::Tensor& cos, const torch::Tensor& sin,
                                            int64_t heads, int64_t kv_heads, double eps,
                                            LayerCache& kv_cache,
                                            const std::vector<int64_t>& positions);

// Whether few_rows_probe takes the probe of these weights: every row's residual h (L, D) float32
// contiguous on the CPU, the q/k/v weights in panels, the probe's first column (v's, or k's
// with_k) on a tile of the panel product.
bool fits_few_rows_probe(const LayerWeights& w, const torch::Tensor& h, int64_t heads,
                         int64_t kv_heads, bool with_k);

// dLLM-Cache's V-verify probe: the rows of h (L, D) at `positions` (P, ascending or not) normed
// with attn_norm, then their v (Hkv, P, Dh) and with_k their k rotated with the tables cos, sin
// (L, Dh) at those positions (undefined without with_k). Each thread its share of the rows in
// one region, from the norm (read from h in runs of consecutive positions, no gather) to the
// heads: one region, not one per op (a gather, the norm, one or two products, a bias add). The
// same bits as rms_norm, linear with v_proj (k_proj) and RopeTables::apply where those products
// run few_rows_product (16 rows or more; fewer go to OpenBLAS).
struct ProbeHeads {
    torch::Tensor k;  // (Hkv, P, Dh) or undefined
    torch::Tensor v;  // (Hkv, P, Dh)
};
ProbeHeads few_rows_probe(const LayerWeights& w, const torch::Tensor& h,
                          const std::vector<int64_t>& positions, const torch::Tensor& cos,
                          const torch::Tensor& sin, int64_t heads, int64_t kv_heads, double eps,
                          bool with_k);

// Whether few_rows_features takes the feature layer of these weights: every row's residual h
// (L, D) and the cached features (attn_out, ffn_out (L, D)) float32 contiguous on the CPU, `rows`
// computed rows (1 to L: a cached step's few, or every row), every product's weights in panels.
bool fits_few_rows_features(const LayerWeights& w, const torch::Tensor& h, int64_t rows,
                            const LayerCache& features);

// The feature-cache layer (dLLM-Cache) after its attention: the computed rows' attention outputs
// a = attn (R, H*Dh) @ attn_out^T and FFN outputs mlp(norm(h[positions] + a)) go into features'
// attn_out and ffn_out (L, D) at `positions` (R), then every row's residual h (L, D) += attn_out,
// += ffn_out in place (cached rows add their cached outputs).
void few_rows_features(const LayerWeights& w, const torch::Tensor& h, const torch::Tensor& attn,
                       const std::vector<int64_t>& positions, LayerCache& features, double eps);

// h (R, D) += attn (R, H*Dh) @ attn_out^T, then h += the gated MLP of norm(h) with ff_norm: in
// place, the rows' residual stream after the layer.
void few_rows_output_and_mlp(const LayerWeights& w, const torch::Tensor& h,
                             const torch::Tensor& attn, double eps);

}  // namespace cl::detail

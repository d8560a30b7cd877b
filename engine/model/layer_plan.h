// What a plan forward asks of each layer, what it reports back, and the hooks through which a
// cache policy takes part (which rows to compute, what to do after a probe or after attention,
// what it saw after a layer). Plain data: no policy logic lives here.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace cl::detail {

// Per-layer K/V (and optionally layer-input hidden states or attention/FFN outputs) for a
// batch-1 sequence.
struct LayerCache {
    torch::Tensor k;         // (Hkv, L, Dh) after RoPE
    torch::Tensor v;         // (Hkv, L, Dh)
    torch::Tensor hidden;    // (L, D) layer input, only when a policy needs it (Elastic)
    torch::Tensor attn_out;  // (L, D) attention block output, feature-cache policies (dLLM-Cache)
    torch::Tensor ffn_out;   // (L, D) FFN block output, feature-cache policies
};

// values as an (N) int64 tensor on `device` (int32 values widened): an empty CPU tensor and a
// copy, then a copy to the device where that is another. A step's torch::tensor(...).to(...) went
// through autograd's variable factory and a copy op, code that a cached step meets cold each time
// (a LibTorch op's first call out of a shared L3 costs tens of times its hot call).
torch::Tensor longs_on(const std::vector<int64_t>& values, torch::Device device);
torch::Tensor longs_on(const std::vector<int32_t>& values, torch::Device device);

// A set of computed rows, held on the host (for decisions and the record) and on the device (for
// index operations), so neither side ever waits for the other.
struct RowSet {
    std::vector<int64_t> host;  // (R) sorted, unique positions
    torch::Tensor device;       // (R) int64 on the model's device

    static RowSet from_host(std::vector<int64_t> rows, torch::Device device);
    int64_t size() const { return static_cast<int64_t>(host.size()); }
};

// What one layer does in a plan forward.
struct LayerPlan {
    bool all_rows = true;       // fast path: every row computed
    RowSet rows;                // computed positions when !all_rows
    bool write_kv = true;       // write the fresh K/V of computed rows into the cache
    bool write_hidden = false;  // store the layer input of computed rows in cache.hidden
    bool want_probs = false;    // hand the attention probabilities to the observer
    // With want_probs (or may_escalate): only these positions' rows of the probabilities, in this
    // order (ascending, each one a computed row); empty = every computed row. Elastic-Cache reads
    // a window of a dozen rows; writing every row's was 5% of its run (all L rows where a layer
    // escalates).
    std::vector<int64_t> probs_positions;
    // Hand the observer the float32 head mean of every computed row's probabilities (d2Cache's
    // rollout): the CPU attention sums it in its own pass without writing the (H, R, L)
    // probabilities, which were 4% of a d2cache step and their head mean's pass another 4%.
    bool want_head_mean = false;
    // With want_probs and probs_positions, where the CPU kernel runs the attention of few enough
    // rows (ColumnAttentionTasks::keeps_scores_for): instead of those rows' probabilities, the
    // attention keeps its scores, which LayerResult::probs_mean_at reads (the float32 head mean of
    // engine/cuda/elastic_drift.h, which Elastic-Cache's drift test and tracking read at a few
    // keys), and sums window_sum_positions' rows per key from them (each kv head's part on the
    // thread that ran it: LayerResult::window_column_sums). Elsewhere the probabilities as asked.
    bool want_probs_mean = false;
    // With want_probs_mean: the positions (ascending, each one of probs_positions) whose column
    // sums Elastic-Cache ranks its window's most-attended keys by (cuda::window_column_sums_cpu's).
    std::vector<int64_t> window_sum_positions;

    // Feature-cache mode (dLLM-Cache): every row keeps a live residual stream; rows that are not
    // computed add their cached attention and FFN outputs (cache.attn_out / ffn_out) instead.
    bool feature_cache = false;
    bool write_features = true;  // store the fresh attn/FFN outputs of computed rows
    // Optional probe before the rows are fixed (feature mode): V (and K after RoPE when probe_k) of
    // these rows, from the live residual, go to LayerHooks::select_rows, which fixes the rows.
    RowSet probe_rows;
    bool probe = false;
    bool probe_k = false;

    // Row-subset mode: after the attention of the planned rows, LayerHooks::escalate sees their
    // probabilities and may recompute this whole layer for every row (Elastic-Cache).
    bool may_escalate = false;
};

// What the plan forward reports after each layer.
struct LayerResult {
    int layer = 0;
    const RowSet* rows = nullptr;  // positions computed (nullptr = all)
    bool escalated = false;        // the layer was recomputed for every row
    torch::Tensor probs;  // (H, R, L) when asked for, else undefined; (H, P, L) with positions:
    std::vector<int64_t> probs_positions;  // the plan's: the P positions of probs' rows
    torch::Tensor head_mean;  // (R, L) float32 with want_head_mean (blocks.h, head_mean_f32)
    // Where the attention kept its scores rather than write the probabilities (want_probs_mean):
    // the float32 head mean of kept row p (of probs_positions) at a key, read from them. Valid
    // until the forward's next layer runs its attention (in the policy's escalate and
    // observe_layer); empty elsewhere.
    std::function<double(int64_t p, int64_t key)> probs_mean_at;
    // (L) the column sums of LayerPlan::window_sum_positions' rows where the attention kept its
    // scores, else empty; and the positions they sum (the plan's, or empty).
    std::vector<double> window_column_sums;
    std::vector<int64_t> window_sum_positions;
    torch::Tensor k, v;  // (Hkv, R, Dh) the fresh K/V of the computed rows (K after RoPE)
    double ms = 0.0;
};

// The policy's side of a plan forward, asked layer by layer.
class LayerHooks {
public:
    virtual ~LayerHooks() = default;
    // Asked just before layer `layer` runs.
    virtual LayerPlan plan(int layer) = 0;
    // Feature mode with a probe: the rows to compute, from the probe rows' K (undefined unless
    // probe_k) and V, both (Hkv, P, Dh).
    virtual RowSet select_rows(int layer, const torch::Tensor& probe_k,
                               const torch::Tensor& probe_v);
    // Row-subset mode with may_escalate: true recomputes the layer for every row. attention: the
    // planned rows' probs (with probs_positions), rows and layer, as observe will see them.
    virtual bool escalate(const LayerResult& attention) { return false; }
    // Reported just after the layer ran.
    virtual void observe(const LayerResult& result) {}
};

}  // namespace cl::detail

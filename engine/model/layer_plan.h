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
// through autograd's variable factory and a copy op, code that a cached step met cold each time
// (out of a shared L3 cache, a LibTorch op's first call took 14.5 us in a scratch harness against
// 0.42 us hot); the step's tokens went through an int64 vector first.
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
    // Hand the observer the float64 head mean of every computed row's probabilities (d2Cache's
    // rollout): the CPU attention sums it in its own pass without writing the (H, R, L)
    // probabilities, which were 4% of a d2cache step and their head mean's pass another 4%.
    bool want_head_mean = false;
    // With want_probs and probs_positions, where the CPU kernel runs the attention: instead of
    // those rows' probabilities, their float32 head mean (engine/cuda/elastic_drift.h's, which
    // Elastic-Cache's window tracking and drift test read), summed in the attention's own pass at
    // one thread; at 2+ threads, for a few-rows layer, their mean summed in the output
    // projection's region from the scores the attention kept (no probabilities written; escalate
    // reads LayerResult::probs_mean_at), for other layers the probabilities; elsewhere the
    // probabilities come as asked.
    bool want_probs_mean = false;
    // With want_probs_mean: these positions' head means (ascending, each one of probs_positions)
    // summed per key from 0.0 in this order, cuda::window_column_sums_cpu's sums (Elastic-Cache
    // ranks its window's most-attended keys by them), into LayerResult::mean_column_sums where the
    // mean is summed in the output projection's region, a share of the keys per thread, beside the
    // mean. Elsewhere none: the reader sums them (on the engine thread, reading the means the other
    // thread wrote, 2.8 us a layer at 2 threads).
    std::vector<int64_t> mean_column_sum_positions;

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
    torch::Tensor head_mean;   // (R, L) float64 with want_head_mean (blocks.h, head_mean_f64)
    torch::Tensor probs_mean;  // (P, L) float64 with want_probs_mean where given (LayerPlan)
    // For escalate only, where the attention kept its scores rather than write the probabilities
    // (want_probs_mean on a few-rows layer at 2+ threads): the probs_mean value of row p at a key,
    // read from them (the same bits). Empty elsewhere, and once escalate has answered.
    std::function<double(int64_t p, int64_t key)> probs_mean_at;
    // (L) the column sums of LayerPlan::mean_column_sum_positions' rows of probs_mean where the
    // forward summed them, else empty; and the positions they sum (the plan's, or empty).
    std::vector<double> mean_column_sums;
    std::vector<int64_t> mean_column_sum_positions;
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

// Transformer: the bidirectional decoder every architecture assembles from the shared blocks,
// with a batched full forward (training, CFG) and a batch-1 forward that executes a per-layer
// plan (which rows are computed, which K/V come from a cache, what is written back). Internal to
// the engine: includes <torch/torch.h>.
//
// Shapes: L sequence length, R computed rows, D d_model, H heads, Hkv kv heads, Dh head dim,
// V vocabulary, N layers, B batch.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/model/layer_plan.h"
#include "engine/model/model_config.h"
#include "engine/model/transformer_weights.h"

namespace cl::detail {

struct KeptAttention;  // blocks.h
struct ProbeHeads;     // few_rows_layer.h

// What a layer's attention hands back besides its output, each where asked for: the probabilities
// of the computed rows at `positions` (every computed row's if empty), or where the CPU kernel can,
// with kept, its kept scores in their place (KeptAttention), with the column sums of the rows at
// window_positions (ascending, each one of positions); and every computed row's float32 head mean.
struct AttentionReads {
    torch::Tensor* probs = nullptr;
    const std::vector<int64_t>* positions = nullptr;
    torch::Tensor* head_mean = nullptr;
    KeptAttention* kept = nullptr;
    const std::vector<int64_t>* window_positions = nullptr;
};

struct LayerRest;  // transformer.cpp

class Transformer {
public:
    Transformer(ModelConfig config, TransformerWeights weights, torch::Device device);

    const ModelConfig& config() const { return m_config; }
    TransformerWeights& weights() { return m_weights; }
    torch::Device device() const { return m_device; }
    // The weights' and activations' type (float32, or bfloat16 on a GPU); caches use it too.
    torch::ScalarType dtype() const { return m_weights.wte.scalar_type(); }
    std::vector<torch::Tensor> parameters() const;

    // ids (B, L) int64 -> logits (B, L, V) float32. Differentiable when grad mode is on (training).
    torch::Tensor forward_full(const torch::Tensor& ids) const;

    // Batch-1 plan forward. ids (L) int64. `hooks.plan(l)` is asked just before layer l runs, so a
    // policy can decide from what the previous layers reported. Rows not computed at a layer take
    // their K/V from `cache[l]`; a layer whose rows are not a subset of the previous layer's rows
    // takes the missing inputs from `cache[l].hidden`. Returns final hidden states after ln_f for
    // the last layer's rows: (R_last, D), with the rows in `out_rows` (nullptr rows = all).
    torch::Tensor forward_plan(const torch::Tensor& ids, LayerHooks& hooks,
                               std::vector<LayerCache>& cache, RowSet& out_rows) const;

    // LM head over hidden rows (R, D) -> (R, V).
    torch::Tensor head(const torch::Tensor& hidden) const;
    // Allocates an empty cache for a sequence of length L.
    std::vector<LayerCache> make_cache(int64_t seq_len, bool with_hidden) const;
    const RopeTables& rope() const { return m_rope; }

private:
    struct PlanState;
    LayerResult feature_layer(int l, const LayerPlan& plan, LayerHooks& hooks, LayerCache& lc,
                              PlanState& s) const;
    // A feature layer's probe (LayerPlan::probe): its probe rows' v, and with probe_k k, from the
    // residual h, in one region on the CPU (few_rows_probe), op by op elsewhere.
    ProbeHeads probe_rows(const LayerWeights& w, const PlanState& s, const LayerPlan& plan) const;
    LayerResult row_layer(int l, LayerPlan plan, LayerHooks& hooks, LayerCache& lc,
                          PlanState& s) const;
    void gather_inputs(int l, const LayerPlan& plan, const LayerCache& lc, PlanState& s) const;
    // Layer l escalated (LayerHooks::escalate) after the attention of `rows`: the attention again
    // for every row, whose inputs come from the hidden cache, into r and fresh. Returns (L, H*Dh).
    torch::Tensor escalated_attention(int l, const LayerPlan& plan, const RowSet& rows,
                                      LayerCache& lc, PlanState& s, LayerResult& r,
                                      const AttentionReads& reads, QkvHeads& fresh) const;
    // Attention block for the rows with inputs h (R, D), normalised here: fresh Q/K/V for the rows,
    // K/V of every other row from `lc` (written back when write_kv). Returns the heads' outputs (R,
    // H*Dh) before the output projection, which the caller adds to the residual or keeps.
    // reads: what else the attention hands back, where asked for. rest: the rest of the layer,
    // which runs in the attention's region where it can (LayerRest).
    torch::Tensor attention_rows(int layer, const torch::Tensor& h, const RowSet* rows,
                                 PlanState& s, LayerCache& lc, bool write_kv,
                                 const AttentionReads& reads, QkvHeads* fresh_out,
                                 LayerRest* rest = nullptr) const;
    torch::Tensor norm(const torch::Tensor& x, const torch::Tensor& w) const;

    // What every forward of L rows starts from: the all-rows index (L) int64 and RoPE's tables of
    // the first L positions (L, Dh), made once per L. Views of the model's tables made at each
    // forward met their code cold: m_positions.narrow took 25-29 us (median) of an Elastic-Cache
    // cached step of about 730 at 2 threads, the tables' two narrows 1.4-5 more.
    struct PrefixViews {
        torch::Tensor positions, cos, sin;
    };
    const PrefixViews& prefix_views(int64_t L) const;

    ModelConfig m_config;
    TransformerWeights m_weights;
    torch::Device m_device;
    RopeTables m_rope;
    // (max positions) int64 0, 1, ... on the model's device: every forward's all-rows set is a view
    // of it (an arange per forward was 0.8% of an Elastic-Cache cached step).
    torch::Tensor m_positions;
    // prefix_views' views by L, shared by the threads that run forwards (a run's engine thread, a
    // sweep's workers); a map, so that a reference stays valid as it grows.
    struct PrefixCache {
        std::mutex lock;
        std::map<int64_t, PrefixViews> views;
    };
    std::shared_ptr<PrefixCache> m_prefix_cache = std::make_shared<PrefixCache>();
};

// x's rows at `rows` (ascending, unique): x (N, C) -> (R, C). A view where they are one run
// (every row, or dLLM-Cache's response rows, which its probe reads at every layer); on the CPU in
// float32 a copy row by row; elsewhere index_select, with device_rows (the rows on x's device)
// where given: the row copies skip index_select's index tensor and dispatch, which a cached step
// pays at every layer.
torch::Tensor rows_of(const torch::Tensor& x, const std::vector<int64_t>& rows,
                      const torch::Tensor& device_rows = {});
torch::Tensor rows_of(const torch::Tensor& x, const RowSet& rows);

// The embeddings of the tokens at `rows`: (R, D) rows of wte (V, D), ids (L) int64. On the CPU in
// float32 a row copy each, naming a position or token id out of range: ids.index_select, then
// wte.index_select, took 1.8% of the engine thread's samples in Elastic-Cache's cached steps at 2
// threads (perf), nearly all in their code rather than the copies; elsewhere those two ops.
torch::Tensor token_rows(const torch::Tensor& wte, const torch::Tensor& ids, const RowSet& rows);

// Analytical FLOPs of one layer computing `rows` query rows against `keys` key rows.
double layer_flops(const ModelConfig& c, int64_t rows, int64_t keys);
double head_flops(const ModelConfig& c, int64_t rows);
// Analytical FLOPs of a feature-cache probe (LayerPlan::probe) of `rows` rows: their V projection,
// and their K projection too when with_k.
double probe_flops(const ModelConfig& c, int64_t rows, bool with_k);

}  // namespace cl::detail

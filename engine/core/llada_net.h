// LladaNet: the LLaDA transformer in LibTorch, with a fast full forward and a forward that
// executes a per-layer plan (which rows are computed, which K/V come from a cache, what is
// written back). Internal to the engine: includes <torch/torch.h>.
//
// Shapes: L sequence length, R computed rows, D d_model, H heads, Hkv kv heads, Dh head dim,
// F mlp hidden, V vocabulary, N layers, B batch.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "engine/core/model_config.h"

namespace cl::detail {

struct LayerWeights {
    torch::Tensor attn_norm;  // (D)
    torch::Tensor q_proj;     // (H*Dh, D)
    torch::Tensor k_proj;     // (Hkv*Dh, D)
    torch::Tensor v_proj;     // (Hkv*Dh, D)
    torch::Tensor attn_out;   // (D, H*Dh)
    torch::Tensor ff_norm;    // (D)
    torch::Tensor ff_proj;    // (F, D) gate, through SiLU
    torch::Tensor up_proj;    // (F, D)
    torch::Tensor ff_out;     // (D, F)
};

struct LladaWeights {
    torch::Tensor wte;   // (V, D)
    torch::Tensor ln_f;  // (D)
    torch::Tensor head;  // (V, D) untied LM head (model.transformer.ff_out)
    std::vector<LayerWeights> layers;

    // Every tensor with its LLaDA name, in checkpoint order.
    std::vector<std::pair<std::string, torch::Tensor*>> named();
};

// Per-layer K/V (and optionally layer-input hidden states or attention/FFN outputs) for a
// batch-1 sequence.
struct LayerCache {
    torch::Tensor k;         // (Hkv, L, Dh) after RoPE
    torch::Tensor v;         // (Hkv, L, Dh)
    torch::Tensor hidden;    // (L, D) layer input, only when a policy needs it (Elastic)
    torch::Tensor attn_out;  // (L, D) attention block output, feature-cache policies (dLLM-Cache)
    torch::Tensor ffn_out;   // (L, D) FFN block output, feature-cache policies
};

// What one layer does in a plan forward.
struct LayerPlan {
    bool all_rows = true;       // fast path: every row computed
    torch::Tensor rows;         // (R) int64 sorted positions computed when !all_rows
    bool write_kv = true;       // write the fresh K/V of computed rows into the cache
    bool write_hidden = false;  // store the layer input of computed rows in cache.hidden
    bool want_probs = false;    // hand the attention probabilities to the observer

    // Feature-cache mode (dLLM-Cache): every row keeps a live residual stream; rows that are not
    // computed add their cached attention and FFN outputs (cache.attn_out / ffn_out) instead.
    bool feature_cache = false;
    bool write_features = true;  // store the fresh attn/FFN outputs of computed rows
    // Optional probe before the rows are fixed: V (and K after RoPE when probe_k) of `probe_rows`,
    // from the live residual, is handed to `select`, which returns the rows to compute (possibly
    // none). Feature mode only.
    torch::Tensor probe_rows;  // (P) int64
    bool probe_k = false;
    std::function<torch::Tensor(const torch::Tensor& probe_k, const torch::Tensor& probe_v)>
        select;  // (Hkv, P, Dh)

    // Optional escalation (Elastic-Cache): after the attention of the planned rows, `escalate`
    // sees their probabilities (H, R, L); returning true recomputes this whole layer for every row
    // (inputs of the other rows from cache.hidden). Row-subset mode only.
    std::function<bool(const torch::Tensor& probs)> escalate;
};

// What the plan forward reports after each layer.
struct LayerResult {
    int layer = 0;
    const torch::Tensor* rows = nullptr;  // (R) positions computed (nullptr = all)
    bool escalated = false;               // the layer was recomputed for every row
    torch::Tensor probs;                  // (H, R, L) when want_probs, else undefined
    double ms = 0.0;
};

using PlanFn = std::function<LayerPlan(int layer)>;
using LayerObserver = std::function<void(const LayerResult&)>;

class LladaNet {
public:
    LladaNet(ModelConfig config, LladaWeights weights, torch::Device device);

    const ModelConfig& config() const { return m_config; }
    LladaWeights& weights() { return m_weights; }
    torch::Device device() const { return m_device; }
    std::vector<torch::Tensor> parameters();

    // ids (B, L) int64 -> logits (B, L, V) float32. Differentiable when grad mode is on (training).
    torch::Tensor forward_full(const torch::Tensor& ids) const;

    // Batch-1 plan forward. ids (L) int64. `plan(l)` is asked just before layer l runs, so a policy
    // can decide from what the previous layers reported. Rows not computed at a layer take their
    // K/V from `cache[l]`; a layer whose rows are not a subset of the previous layer's rows takes
    // the missing inputs from `cache[l].hidden`. Returns final hidden states after ln_f for the
    // last layer's rows: (R_last, D), with the rows in `out_rows` (R_last).
    torch::Tensor forward_plan(const torch::Tensor& ids, const PlanFn& plan,
                               std::vector<LayerCache>& cache, const LayerObserver& observer,
                               torch::Tensor& out_rows) const;

    // LM head over hidden rows (R, D) -> (R, V).
    torch::Tensor head(const torch::Tensor& hidden) const;
    // Allocates an empty cache for a sequence of length L.
    std::vector<LayerCache> make_cache(int64_t seq_len, bool with_hidden) const;

    // Primitives (public for policies and tests).
    torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const;
    // positions (T) int64 -> cos, sin (T, Dh)
    std::pair<torch::Tensor, torch::Tensor> rope_tables(const torch::Tensor& positions) const;
    // cos, sin (L, Dh) of positions 0..L-1: views of tables computed once at construction (up to
    // max_sequence_length), so a step does not recompute L x Dh sines and cosines.
    std::pair<torch::Tensor, torch::Tensor> rope_prefix(int64_t L) const;
    // x (..., T, Dh) rotated NeoX style (halves) with tables (T, Dh)
    static torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos,
                                    const torch::Tensor& sin);
    torch::Tensor mlp(int layer, const torch::Tensor& x) const;
    // Attention block for `rows` (R) with normalised inputs x (R, D): fresh Q/K/V for the rows,
    // K/V of every other row from `lc` (written back when write_kv). Returns (R, D); probabilities
    // (H, R, L) into *probs_out when given.
    torch::Tensor attention_rows(int layer, const torch::Tensor& x, const torch::Tensor& rows,
                                 bool all_rows, const torch::Tensor& cos_all,
                                 const torch::Tensor& sin_all, LayerCache& lc, bool write_kv,
                                 torch::Tensor* probs_out, torch::Tensor* k_out = nullptr,
                                 torch::Tensor* v_out = nullptr) const;

private:
    ModelConfig m_config;
    LladaWeights m_weights;
    torch::Device m_device;
    torch::Tensor m_inv_freq;              // (Dh/2) float64 on the device
    torch::Tensor m_rope_cos, m_rope_sin;  // (max_sequence_length, Dh) f32 on the device
};

// Analytical FLOPs of one layer computing `rows` query rows against `keys` key rows.
double layer_flops(const ModelConfig& c, int64_t rows, int64_t keys);
double head_flops(const ModelConfig& c, int64_t rows);

}  // namespace cl::detail

// cl_trace record types: what one run of the denoising engine produced, step by step.
//
// [SECTION] Enums   [SECTION] RunInfo   [SECTION] StepRecord   [SECTION] RunSummary
//
// These are plain data. A StepRecord is immutable once published (shared_ptr<const>), and the
// same records are produced by the live engine and by a session reader, so panels cannot tell
// live from replay. Per (layer, row) data is stored row-major as layer * seq_len + row.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace cl::trace {

// [SECTION] Enums

// State of one sequence position after a step.
enum class TokenState : uint8_t {
    Prompt = 0,          // part of the prompt, never changes
    Masked = 1,          // still [MASK] after this step
    DecodedNow = 2,      // committed during this step
    DecodedEarlier = 3,  // committed during an earlier step
};

// What happened to the cache for one (layer, row) during a step's forward.
enum class RowAction : uint8_t {
    Skipped = 0,        // row not present at this layer (its state was not needed)
    Recomputed = 1,     // Q, K, V, attention and FFN computed fresh
    KvReused = 2,       // K/V served from the cache, nothing computed for the row
    ProbedOnly = 3,     // a cheap probe (e.g. V for a similarity test) computed, rest reused
    FeatureReused = 4,  // cached attention/FFN outputs added to the live residual
};

inline const char* to_string(TokenState s) {
    switch (s) {
        case TokenState::Prompt:
            return "prompt";
        case TokenState::Masked:
            return "masked";
        case TokenState::DecodedNow:
            return "decoded-now";
        case TokenState::DecodedEarlier:
            return "decoded-earlier";
    }
    return "?";
}

inline const char* to_string(RowAction a) {
    switch (a) {
        case RowAction::Skipped:
            return "skipped";
        case RowAction::Recomputed:
            return "recomputed";
        case RowAction::KvReused:
            return "kv-reused";
        case RowAction::ProbedOnly:
            return "probed-only";
        case RowAction::FeatureReused:
            return "feature-reused";
    }
    return "?";
}

// [SECTION] RunInfo

// Everything needed to understand (and reproduce) a run, fixed when the run starts.
struct RunInfo {
    int32_t run_id = 0;
    std::string policy;                                // e.g. "none", "dkv-decode"
    std::map<std::string, std::string> policy_params;  // resolved parameters, as text
    std::map<std::string, std::string> sampler;        // generation config, as text
    std::string model_name;
    std::string model_hash;                // content hash of the weights file(s)
    std::string noise_process = "masked";  // of the model: "masked" or "uniform"
    std::string architecture = "llada";    // of the model: "llada", "dream"
    std::string device;                    // "cpu" or "cuda:0"
    std::string dtype = "fp32";            // weights and activations: "fp32" or "bf16"
    // The kernel set its steps ran at: "fast" or "reference" (engine/kernels/kernel_choice.h).
    std::string kernels = "fast";
    int32_t threads = 1;
    uint64_t seed = 0;
    std::string prompt_text;
    int32_t prompt_len = 0;  // P
    int32_t gen_len = 0;     // G
    int32_t block_len = 0;   // B
    int32_t steps = 0;       // T (planned; parallel decoding may use fewer)
    int32_t n_layers = 0;    // N
    int32_t n_heads = 0;
    // Keys (and, at a step computing more rows than the map has cells a side, query positions)
    // per stored cell of the run's head-mean maps: 1 = full resolution (trace/attention_detail.h).
    int32_t attention_tile = 1;
    int32_t mask_id = -1;
    int32_t eos_id = -1;
    std::vector<int32_t> initial_tokens;        // (L) prompt ++ [MASK]*G (uniform: random tokens)
    std::map<int32_t, std::string> token_text;  // id -> display text, filled as ids appear
    std::string app_version;

    int32_t seq_len() const { return prompt_len + gen_len; }
};

// [SECTION] StepRecord

// A refresh decision or drift measurement, with the numbers behind it.
struct TriggerEvent {
    std::string kind;    // "interval", "block-start", "drift", "v-verify", "selection", ...
    int32_t layer = -1;  // -1 = whole model
    int32_t row = -1;    // -1 = not tied to one row
    double value = std::numeric_limits<double>::quiet_NaN();
    double threshold = std::numeric_limits<double>::quiet_NaN();
    bool fired = false;  // whether the test triggered a refresh
    std::string action;  // human-readable consequence, e.g. "recompute layers 3..5"
};

// Attention probabilities for one layer and head (head -1 = mean over heads), held as 8-bit
// levels of each stored row's maximum: p = level / 255 * row_scale[row]. A quarter of the memory
// of floats, the same bytes live and in a replay of an 8-bit session, and within 1/510 of the row
// maximum of the float map the engine computed.
//
// Level of detail: a map may be pooled into tiles so that a run's maps fit its attention budget
// (engine/trace/attention_detail.h). A stored column is the mean over `key_tile` consecutive keys
// (the last tile may be shorter), a stored row the mean over the query rows computed this step
// among `row_tile` consecutive positions, starting at row_index[r] (a multiple of row_tile). With
// both tiles 1 (the embedded models' runs at the default budget) the map is at full resolution:
// stored rows are the computed query rows and columns are keys.
struct AttentionMap {
    int32_t layer = 0;
    int32_t head = -1;
    int32_t rows = 0;                // stored rows (<= L)
    int32_t cols = 0;                // stored columns: ceil(keys / key_tile)
    int32_t keys = 0;                // key positions covered (= L); 0 reads as cols
    int32_t key_tile = 1;            // keys per stored column
    int32_t row_tile = 1;            // query positions per stored row
    std::vector<int32_t> row_index;  // (rows) first sequence position of each stored row
    std::vector<float> row_scale;    // (rows) the stored row's maximum (mean) probability
    std::vector<uint8_t> levels;     // (rows, cols) row-major, 0..255

    float prob(int32_t row, int32_t col) const {
        const auto r = static_cast<size_t>(row);
        return static_cast<float>(
                   levels[r * static_cast<size_t>(cols) + static_cast<size_t>(col)]) *
               (row_scale[r] * (1.f / 255.f));
    }
    bool full_resolution() const { return key_tile == 1 && row_tile == 1; }
    int32_t key_count() const { return keys > 0 ? keys : cols; }
    // The stored column holding key `key` (no bounds check beyond the map's keys: -1 outside).
    int32_t column_of(int32_t key) const {
        return key >= 0 && key < key_count() ? key / key_tile : -1;
    }
    // The stored row holding query position `position`, or -1 when that position's tile holds no
    // row computed at this step.
    int32_t row_of(int32_t position) const;
    // The mean probability of the cell holding (query position, key); NaN where not recorded.
    float prob_at(int32_t position, int32_t key) const;
    // What the map shows, for a panel's caption: "full resolution", "8x8 tiles", "computed rows,
    // keys in tiles of 8".
    std::string describe() const;
    // Quantises a (rows, cols) row-major float map (rows and cols must be set). Non-finite and
    // negative values read as 0.
    void set_probs(const float* p) { set_head_mean(p, 1); }
    // Quantises the mean over `heads` (heads, rows, cols) row-major float maps in one pass: the
    // engine's per-layer trace work, so it sums a row of every head into a small buffer and
    // quantises it with SIMD (no (rows, cols) float mean is ever materialised).
    void set_head_mean(const float* p, int32_t heads);
    // The same for a pooled map: p is (heads, R, L) over the computed query rows at `positions`
    // (R, ascending); key_tile, row_tile and keys (= L) must be set. Each cell is the float mean
    // over its heads, keys and computed rows, summed in that order (heads in head order, then keys,
    // then rows): the definition the device's pooling (attention_detail.h) is checked against.
    void set_pooled_head_mean(const float* p, int32_t heads, const std::vector<int32_t>& positions);
};

// Oracle mode: the cached forward compared with a full forward at the same step.
struct OracleRecord {
    std::vector<float> k_cos;     // (N, L) cosine of reused vs fresh K; NaN where computed
    std::vector<float> v_cos;     // (N, L)
    std::vector<float> k_rel_l2;  // (N, L) |reused - fresh| / |fresh|
    std::vector<float> v_rel_l2;  // (N, L)
    double logits_kl = 0.0;       // mean KL(full || cached) over the step's decodable rows
    bool commit_differs = false;  // the full forward would have committed other tokens
};

// Drift probe: how much each row's K/V changed when it was computed at this step, against the K/V
// it had in use (its last computed ones: for a policy that computes every row at every step, the
// previous step's). NaN where the row was not computed or had no earlier K/V.
struct DriftRecord {
    std::vector<float> k_cos;     // (N, L) cosine of the new K against the K in use
    std::vector<float> v_cos;     // (N, L)
    std::vector<float> k_rel_l2;  // (N, L) |new - in use| / |in use|
    std::vector<float> v_rel_l2;  // (N, L)
};

struct StepRecord {
    int32_t run_id = 0;
    int32_t step = 0;   // 0-based global step
    int32_t block = 0;  // current block index
    int32_t step_in_block = 0;
    int32_t seq_len = 0;   // L
    int32_t n_layers = 0;  // N

    std::vector<int32_t> tokens;     // (L) ids after this step
    std::vector<TokenState> states;  // (L) after this step
    std::vector<int32_t> predicted;  // (L) argmax candidate at rows that were masked, else -1
    std::vector<float> confidence;   // (L) confidence of that candidate, NaN if none
    // Inspector data for rows predicted this step: the top kTopK candidates with probabilities,
    // the entropy of the prediction and the margin p1 - p2 (empty/NaN/-1 where not predicted).
    static constexpr int kTopK = 5;
    std::vector<int32_t> topk_ids;   // (L, kTopK)
    std::vector<float> topk_probs;   // (L, kTopK)
    std::vector<float> entropy;      // (L) nats
    std::vector<float> margin;       // (L)
    std::vector<int32_t> committed;  // positions committed this step, in commit order
    // Display text of ids that appear in this run for the first time at this step (tokens or
    // predictions), so a replay can show text without the tokenizer.
    std::map<int32_t, std::string> new_token_text;

    std::vector<RowAction> actions;   // (N, L) what each layer did for each row
    std::vector<uint16_t> cache_age;  // (N, L) steps since the row's K/V were computed
    std::vector<TriggerEvent> triggers;
    std::vector<AttentionMap> attention;

    double wall_ms = 0.0;         // whole step
    std::vector<float> layer_ms;  // (N)
    double flops = 0.0;           // analytical, what was computed
    double flops_full = 0.0;      // analytical, a full forward at this step

    bool has_oracle = false;
    OracleRecord oracle;
    bool has_drift = false;
    DriftRecord drift;

    RowAction action(int32_t layer, int32_t row) const {
        return actions[static_cast<size_t>(layer) * seq_len + row];
    }
    // Fraction of (layer, row) pairs recomputed in this step.
    double recompute_fraction() const;
};

// [SECTION] RunSummary

enum class RunStatus : uint8_t { Running = 0, Complete = 1, Aborted = 2 };

inline const char* to_string(RunStatus s) {
    switch (s) {
        case RunStatus::Running:
            return "running";
        case RunStatus::Complete:
            return "complete";
        case RunStatus::Aborted:
            return "aborted";
    }
    return "?";
}

struct RunSummary {
    RunStatus status = RunStatus::Running;
    int32_t steps = 0;
    int32_t generated_tokens = 0;  // up to and excluding the first EOS
    double wall_ms = 0.0;
    double tokens_per_s = 0.0;
    double flops = 0.0;
    double flops_full = 0.0;
    double recompute_fraction = 0.0;  // mean over steps
    std::vector<int32_t> final_tokens;
    std::string final_text;
};

}  // namespace cl::trace

#include "engine/generation/memory_estimate.h"

#include <algorithm>
#include <cstdio>

#include "engine/base/errors.h"
#include "engine/trace/attention_detail.h"

namespace cl {

namespace {

constexpr double kFloat = 4;  // bytes: activations and caches are fp32 on the CPU

std::string gigabytes(double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
    return text;
}

}  // namespace

std::string MemoryEstimate::describe() const {
    std::string text = "about " + gigabytes(total()) + " (forward " + gigabytes(forward_bytes) +
                       ", caches " + gigabytes(cache_bytes) + ", trace " + gigabytes(trace_bytes);
    if (attention_budget > 0)
        text += ", of which attention " + gigabytes(attention_bytes) + " at a " +
                trace::megabytes(attention_budget) + " budget";
    return text + ")";
}

MemoryEstimate estimate_run_memory(const ModelConfig& c, int64_t seq_len, int64_t steps,
                                   double attention_budget, bool oracle,
                                   int64_t full_resolution_layers) {
    const double L = static_cast<double>(std::max<int64_t>(seq_len, 1));
    const double N = static_cast<double>(std::max<int64_t>(c.n_layers, 1));
    const double d = static_cast<double>(std::max<int64_t>(c.d_model, 1));
    const double ff = static_cast<double>(std::max<int64_t>(c.mlp_hidden_size, 1));
    const double heads = static_cast<double>(std::max<int64_t>(c.n_heads, 1));
    const double kv = static_cast<double>(std::max<int64_t>(c.n_kv_heads, 1)) * d / heads;
    const double vocab = static_cast<double>(std::max<int64_t>(c.vocab_size, 1));
    MemoryEstimate e;
    // One layer at a time: scores and probabilities (heads, L, L), the hidden states and MLP
    // intermediates (L, 3 ff + 6 d), the logits (L, vocab); the oracle runs a second forward.
    e.forward_bytes =
        (2 * heads * L * L + L * (3 * ff + 6 * d) + 2 * L * vocab) * kFloat * (oracle ? 2 : 1);
    // K and V of every layer plus the feature caches (attention and MLP outputs) some policies
    // keep, each (N, L, width).
    e.cache_bytes = N * L * (2 * kv + 2 * d) * kFloat;
    // Per step: tokens, states, predictions, confidences (L of each) and the per-(layer, row)
    // actions, ages and drift values; with attention, every layer's map at the run's tile size.
    const double per_step = L * 16 + N * L * 12;
    e.trace_bytes = per_step * static_cast<double>(std::max<int64_t>(steps, 1));
    if (attention_budget > 0) {
        const int32_t tile =
            trace::attention_tile_for_budget(attention_budget, c.n_layers, seq_len, steps);
        e.attention_budget = attention_budget;
        e.attention_bytes =
            trace::attention_run_bytes(tile, c.n_layers, seq_len, steps, full_resolution_layers);
        e.trace_bytes += e.attention_bytes;
    }
    return e;
}

void check_memory_fits(const MemoryEstimate& estimate, double available,
                       const std::string& device) {
    if (available <= 0 || estimate.total() <= 0.9 * available) return;
    throw InputError(
        Setting{"gen_length"},
        "this run would need " + estimate.describe() + " beyond the model, and " +
            gigabytes(available) + (device.empty() ? " is available" : " is free on " + device) +
            ": lower gen_length or steps, or the attention budget (--attention-budget, "
            "the app's Attention budget), or turn off attention tracing / oracle "
            "mode");
}

}  // namespace cl

#include "engine/model/transformer.h"

#include "engine/model/few_rows_layer.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

#include "engine/base/errors.h"
#include "engine/model/empty_buffer.h"

namespace cl::detail {

namespace {

// values (N), widened to int64, filled on the CPU and then copied where the device is another.
template <class Int>
torch::Tensor longs_from(const std::vector<Int>& values, torch::Device device) {
    auto out = empty_buffer({static_cast<int64_t>(values.size())},
                            torch::TensorOptions().dtype(torch::kLong));  // (N)
    std::copy(values.begin(), values.end(), out.data_ptr<int64_t>());
    return device.is_cpu() ? out : out.to(device);
}

// (R, C) rows of x (N, C), contiguous float32 on the CPU, where row i is x's row_of(i) (which
// checks it): a row copy each.
template <class RowOf>
torch::Tensor copied_rows(const torch::Tensor& x, int64_t R, const RowOf& row_of) {
    const int64_t C = x.size(1);
    auto out = empty_buffer({R, C}, x.options());  // (R, C)
    const float* from = x.data_ptr<float>();
    float* to = out.data_ptr<float>();
    for (int64_t i = 0; i < R; ++i) std::copy_n(from + row_of(i) * C, C, to + i * C);
    return out;
}

}  // namespace

torch::Tensor longs_on(const std::vector<int64_t>& values, torch::Device device) {
    return longs_from(values, device);
}

torch::Tensor longs_on(const std::vector<int32_t>& values, torch::Device device) {
    return longs_from(values, device);
}

RowSet RowSet::from_host(std::vector<int64_t> rows, torch::Device device) {
    RowSet r;
    r.device = longs_on(rows, device);
    r.host = std::move(rows);
    return r;
}

namespace {

// Whether write_rows's loop takes dst (..., L, C) and src (..., R, C): float32 on the CPU without
// gradients, dst contiguous, src's rows with unit stride, at most one leading dimension.
bool rows_copy_fits(const torch::Tensor& dst, const torch::Tensor& src, int64_t rows) {
    return uses_row_kernels(dst) && uses_row_kernels(src) && dst.is_contiguous() &&
           src.stride(-1) == 1 && (dst.dim() == 2 || dst.dim() == 3) && src.dim() == dst.dim() &&
           src.size(0) == (dst.dim() == 3 ? dst.size(0) : rows) && src.size(-2) == rows &&
           src.size(-1) == dst.size(-1);
}

// pos where it is one of L (rows, tokens: `what`), else an error naming the caller and both.
int64_t position_in(const char* caller, int64_t pos, int64_t L, const char* what) {
    if (pos < 0 || pos >= L)
        throw std::out_of_range(std::string(caller) + ": position " + std::to_string(pos) +
                                " outside the " + std::to_string(L) + " " + what);
    return pos;
}

// dst's rows at `rows` (its second-to-last dimension) = src: a loop of row copies on the CPU.
// Not LibTorch 1.13's index_copy_: its fixed cost per call, paid twice a layer, is far more than
// copying a cached step's few dozen rows.
void write_rows(torch::Tensor& dst, const RowSet& rows, const torch::Tensor& src) {
    if (!rows_copy_fits(dst, src, rows.size())) {
        dst.index_copy_(dst.dim() - 2, rows.device, src);
        return;
    }
    const int64_t planes = dst.dim() == 3 ? dst.size(0) : 1, L = dst.size(-2), C = dst.size(-1);
    const int64_t plane_stride = dst.dim() == 3 ? src.stride(0) : 0, row_stride = src.stride(-2);
    const float* from = src.data_ptr<float>();
    float* to = dst.data_ptr<float>();
    for (int64_t i = 0; i < rows.size(); ++i) {
        const int64_t pos = position_in("write_rows", rows.host[static_cast<size_t>(i)], L, "rows");
        for (int64_t p = 0; p < planes; ++p)
            std::copy_n(from + p * plane_stride + i * row_stride, C, to + (p * L + pos) * C);
    }
}

// dst with src written at `rows`, dst itself unchanged.
torch::Tensor with_rows(const torch::Tensor& dst, const RowSet& rows, const torch::Tensor& src) {
    auto out = dst.clone();
    write_rows(out, rows, src);
    return out;
}

}  // namespace

torch::Tensor token_rows(const torch::Tensor& wte, const torch::Tensor& ids, const RowSet& rows) {
    if (!uses_row_kernels(wte) || !wte.is_contiguous() || wte.dim() != 2 ||
        !ids.device().is_cpu() || ids.scalar_type() != torch::kLong || !ids.is_contiguous())
        return wte.index_select(0, ids.index_select(0, rows.device));
    const int64_t V = wte.size(0), L = ids.size(0);
    const int64_t* id = ids.data_ptr<int64_t>();
    return copied_rows(wte, rows.size(), [&](int64_t i) {
        const int64_t pos =
            position_in("token_rows", rows.host[static_cast<size_t>(i)], L, "tokens");
        const int64_t token = id[pos];
        if (token < 0 || token >= V)
            throw std::out_of_range("token_rows: token id " + std::to_string(token) +
                                    " at position " + std::to_string(pos) +
                                    " outside the vocabulary of " + std::to_string(V));
        return token;
    });
}

RowSet LayerHooks::select_rows(int layer, const torch::Tensor&, const torch::Tensor&) {
    throw std::logic_error("layer " + std::to_string(layer) +
                           " asked for a probe but its hooks do not select rows");
}

namespace {

// Positions the model keeps tables for (RoPE's, the all-rows index); a longer forward computes
// its own.
int64_t tabled_positions(const ModelConfig& c) {
    return std::min<int64_t>(c.max_sequence_length, 16384);
}

}  // namespace

Transformer::Transformer(ModelConfig config, TransformerWeights weights, torch::Device device)
    : m_config(std::move(config)),
      m_weights(std::move(weights)),
      m_device(device),
      m_rope(m_config.rope_theta, m_config.head_dim(), tabled_positions(m_config), device),
      m_positions(torch::arange(tabled_positions(m_config),
                                torch::TensorOptions().dtype(torch::kLong).device(device))) {}

std::vector<torch::Tensor> Transformer::parameters() const {
    std::vector<torch::Tensor> out;
    m_weights.for_each([&](const torch::Tensor& t) { out.push_back(t); });
    return out;
}

torch::Tensor Transformer::norm(const torch::Tensor& x, const torch::Tensor& w) const {
    return rms_norm(x, w, m_config.rms_norm_eps);
}

const Transformer::PrefixViews& Transformer::prefix_views(int64_t L) const {
    const std::lock_guard<std::mutex> hold(m_prefix_cache->lock);
    auto& views = m_prefix_cache->views;
    if (const auto it = views.find(L); it != views.end()) return it->second;
    PrefixViews v;
    v.positions = L <= m_positions.size(0) ? m_positions.narrow(0, 0, L)
                                           : torch::arange(L, m_positions.options());  // (L)
    std::tie(v.cos, v.sin) = m_rope.prefix(L);                                         // (L, Dh)
    return views.emplace(L, std::move(v)).first->second;
}

torch::Tensor Transformer::head(const torch::Tensor& hidden) const {
    return detail::linear(hidden, m_weights.head, {}, m_weights.head_panels);  // (R, D) -> (R, V)
}

torch::Tensor Transformer::forward_full(const torch::Tensor& ids) const {
    const auto& c = m_config;
    const int64_t B = ids.size(0), L = ids.size(1), D = c.d_model;
    auto h = m_weights.wte.index_select(0, ids.reshape({-1})).reshape({B, L, D});  // (B, L, D)
    const auto& prefix = prefix_views(L);
    const auto &cos = prefix.cos, &sin = prefix.sin;  // (L, Dh)
    for (const auto& w : m_weights.layers) {
        auto qkv = project_qkv(w, norm(h, w.attn_norm), cos, sin, c.n_heads, c.n_kv_heads);
        h = add_linear(h, attend(qkv.q, qkv.k, qkv.v), w.attn_out,
                       w.attn_out_panels);        // (B, L, D)
        h = gated_mlp(w, norm(h, w.ff_norm), h);  // h + the MLP's output
    }
    return head(norm(h, m_weights.ln_f));  // (B, L, V)
}

std::vector<LayerCache> Transformer::make_cache(int64_t seq_len, bool with_hidden) const {
    const auto& c = m_config;
    auto opts = torch::TensorOptions().dtype(dtype()).device(m_device);
    std::vector<LayerCache> cache(static_cast<size_t>(c.n_layers));
    for (auto& lc : cache) {
        lc.k = torch::zeros({c.n_kv_heads, seq_len, c.head_dim()}, opts);
        lc.v = torch::zeros({c.n_kv_heads, seq_len, c.head_dim()}, opts);
        if (with_hidden) lc.hidden = torch::zeros({seq_len, c.d_model}, opts);
    }
    return cache;
}

// The state a plan forward carries from one layer to the next.
struct Transformer::PlanState {
    torch::Tensor ids;  // (L) int64
    int64_t L = 0;
    RowSet all;                    // every position
    torch::Tensor cos, sin;        // (L, Dh)
    torch::Tensor h;               // (R_prev, D) hidden of the rows the previous layer computed
    const RowSet* prev = nullptr;  // rows of h; nullptr before layer 0
    RowSet prev_rows;              // storage for prev when it is not `all`
    bool prev_all = true;
    // cos, sin (R, Dh) of the positions of rope_rows: a cached step's layers mostly compute the
    // same rows, so they are gathered once per step, not twice per layer.
    std::vector<int64_t> rope_rows;
    torch::Tensor rows_cos, rows_sin;
};

torch::Tensor rows_of(const torch::Tensor& x, const std::vector<int64_t>& rows,
                      const torch::Tensor& device_rows) {
    const auto R = static_cast<int64_t>(rows.size());
    if (R > 0 && rows.back() - rows.front() + 1 == R) return x.narrow(0, rows.front(), R);
    if (!uses_row_kernels(x) || x.dim() != 2 || !x.is_contiguous())
        return x.index_select(
            0, device_rows.defined() ? device_rows : RowSet::from_host(rows, x.device()).device);
    const int64_t N = x.size(0);
    return copied_rows(x, R, [&](int64_t i) {
        const int64_t row = rows[static_cast<size_t>(i)];
        if (row < 0 || row >= N)
            throw std::out_of_range("rows_of: row " + std::to_string(row) + " outside the " +
                                    std::to_string(N) + " rows");
        return row;
    });
}

torch::Tensor rows_of(const torch::Tensor& x, const RowSet& rows) {
    return rows_of(x, rows.host, rows.device);
}

namespace {

// positions (ascending) -> their indices in `sorted` (ascending), which must hold each one: what
// asked for them and what `sorted` is, for the error.
std::vector<int64_t> indices_in(const std::vector<int64_t>& positions,
                                const std::vector<int64_t>& sorted, const char* what,
                                const char* among) {
    std::vector<int64_t> out;
    out.reserve(positions.size());
    auto from = sorted.begin();
    for (int64_t p : positions) {
        from = std::lower_bound(from, sorted.end(), p);
        if (from == sorted.end() || *from != p)
            throw std::logic_error(std::string("forward_plan: ") + what + " asked for position " +
                                   std::to_string(p) + ", which is not among " + among);
        out.push_back(from - sorted.begin());
    }
    return out;
}

// positions (ascending, each a computed row) -> their indices among the computed rows (nullptr:
// every row, a position is its own index).
std::vector<int64_t> query_rows_of(const std::vector<int64_t>& positions, const RowSet* rows) {
    return rows ? indices_in(positions, rows->host, "probabilities", "the rows the layer computes")
                : positions;
}

// The query rows of reads' window positions, where the attention may keep its scores and sum
// their columns: each must be one of the positions whose probabilities are read.
std::vector<int64_t> window_rows_of(const AttentionReads& reads, const RowSet* rows) {
    if (!reads.kept || !reads.window_positions || reads.window_positions->empty()) return {};
    (void)indices_in(*reads.window_positions,
                     reads.positions ? *reads.positions : std::vector<int64_t>{}, "column sums",
                     "the probabilities' rows");
    return query_rows_of(*reads.window_positions, rows);
}

}  // namespace

// A row layer's work after the attention of its planned rows, which attention_rows may run in the
// attention's own region (few_rows_layer) instead of leaving it to row_layer: the policy's look at
// the attention (whether the layer goes on), then the output projection and MLP of those rows
// into h.
struct LayerRest {
    std::function<bool()> verdict;
    bool few_rows = false;  // the output and MLP may run as few_rows_output_and_mlp
    // LayerMidpoint::rows_before_go_on: a layer that stops does not need h's rows any more (it
    // never stops, or it starts again from the hidden cache).
    bool rows_before_go_on = false;
    // go_on always answers true and no inputs are to be kept: the attention's region may take the
    // rows through the whole layer before it is asked (few_rows_layer_with_head_mean).
    bool finishes_unasked = false;
    // LayerMidpoint::keep_inputs: the hidden cache, where the region keeps the rows' inputs.
    torch::Tensor keep_inputs;
    bool inputs_kept = false;  // the region kept them
    bool finished = false;     // the output and MLP ran in the attention's region
    // LayerMidpoint::scores: where the attention kept its scores (AttentionReads::kept) and wrote
    // no probabilities; during the region only.
    const KeptScores* scores = nullptr;
    // The verdict, asked once.
    bool go_on() {
        if (!m_go_on) m_go_on = verdict();
        return *m_go_on;
    }

private:
    std::optional<bool> m_go_on;
};

namespace {

// The ways a layer's planned rows run, named; layer_variant below is the one place that picks one.
enum class LayerVariant {
    // few_rows_layer: a cached step's few rows from the norm through the MLP in one parallel
    // region (the output and MLP where the policy's verdict allows), the attention by kv heads.
    WholeLayer,
    // few_rows_qkv_attention: the q/k/v pass and the attention of the rows in one region.
    QkvAndAttention,
    // few_rows_layer_with_head_mean: d2Cache's layers, each thread its rows through the whole
    // layer with the attention's head mean.
    HeadMeanLayer,
    // few_rows_qkv (norm to the cache writes in one pass per thread), then attend.
    FusedQkv,
    // project_qkv then attend, op by op: every row, a GPU, training, the reference kernels.
    OpByOp,
};

// One call of attention_rows: what every variant reads.
struct LayerCall {
    const LayerWeights& w;
    const ModelConfig& c;
    const torch::Tensor& h;  // (R, D) the rows' inputs
    const RowSet* rows;      // nullptr: every row
    const torch::Tensor& cos;
    const torch::Tensor& sin;  // (R, Dh)
    LayerCache& lc;
    bool write_kv;
    const AttentionReads& reads;
    QkvHeads* fresh_out;
    LayerRest* rest;
    const std::vector<int64_t>& probs_rows;   // the rows whose probabilities are read
    const std::vector<int64_t>& window_rows;  // where the kept scores' column sums are read
    bool some() const { return !probs_rows.empty(); }
};

LayerVariant layer_variant(const LayerCall& k) {
    if (k.rows == nullptr || !fits_few_rows_layer(k.w, k.h, k.write_kv ? &k.lc : nullptr))
        return LayerVariant::OpByOp;
    if (k.write_kv && !k.reads.head_mean &&
        fuses_qkv_and_attention(k.h, k.lc, k.c.n_heads, k.c.n_kv_heads))
        return k.rest && k.rest->few_rows ? LayerVariant::WholeLayer
                                          : LayerVariant::QkvAndAttention;
    if (k.write_kv && k.reads.head_mean && !k.reads.probs && !k.reads.kept && k.rest &&
        k.rest->finishes_unasked && fuses_layer_with_head_mean(k.h, k.lc))
        return LayerVariant::HeadMeanLayer;
    return LayerVariant::FusedQkv;
}

torch::Tensor whole_layer(const LayerCall& k) {
    LayerRest& rest = *k.rest;
    auto layer =
        few_rows_layer(k.w, k.h, k.cos, k.sin, k.c.n_heads, k.c.n_kv_heads, k.c.rms_norm_eps, k.lc,
                       k.rows->host, k.reads.probs, k.some() ? &k.probs_rows : nullptr,
                       {[&rest] { return rest.go_on(); }, rest.rows_before_go_on, rest.keep_inputs,
                        k.reads.kept ? [&rest](const KeptScores& kept) { rest.scores = &kept; }
                                     : std::function<void(const KeptScores&)>{},
                        &k.window_rows});
    rest.scores = nullptr;  // asked in there (go_on)
    rest.inputs_kept = rest.keep_inputs.defined();
    rest.finished = layer.finished;
    if (k.reads.kept && layer.kept)
        *k.reads.kept = {nullptr, true, std::move(*layer.kept), std::move(layer.window_sums)};
    if (k.fresh_out) *k.fresh_out = layer.qkv;
    return layer.attn;  // (R, H*Dh)
}

torch::Tensor qkv_and_attention(const LayerCall& k) {
    auto both = few_rows_qkv_attention(k.w, k.h, k.cos, k.sin, k.c.n_heads, k.c.n_kv_heads,
                                       k.c.rms_norm_eps, k.lc, k.rows->host, k.reads.probs,
                                       k.some() ? &k.probs_rows : nullptr);
    if (k.fresh_out) *k.fresh_out = both.qkv;
    return both.attn;  // (R, H*Dh)
}

torch::Tensor head_mean_layer(const LayerCall& k) {
    auto layer = few_rows_layer_with_head_mean(k.w, k.h, k.cos, k.sin, k.c.n_heads, k.c.n_kv_heads,
                                               k.c.rms_norm_eps, k.lc, k.rows->host);
    *k.reads.head_mean = layer.head_mean;  // (R, L)
    k.rest->finished = true;
    if (k.fresh_out) *k.fresh_out = layer.qkv;
    return layer.attn;  // (R, H*Dh)
}

// The rows' q, k, v, then attend over the cache with them (FusedQkv or OpByOp).
torch::Tensor qkv_then_attend(const LayerCall& k, bool fused) {
    const auto& c = k.c;
    auto qkv = fused ? few_rows_qkv(k.w, k.h, k.cos, k.sin, c.n_heads, c.n_kv_heads, c.rms_norm_eps,
                                    k.write_kv ? &k.lc : nullptr, k.rows->host)
                     : project_qkv(k.w, rms_norm(k.h, k.w.attn_norm, c.rms_norm_eps), k.cos, k.sin,
                                   c.n_heads, c.n_kv_heads);
    if (k.fresh_out) *k.fresh_out = qkv;
    torch::Tensor k_all, v_all;  // (Hkv, L, Dh)
    if (fused && k.write_kv) {   // few_rows_qkv wrote the fresh rows into the cache
        k_all = k.lc.k;
        v_all = k.lc.v;
    } else if (k.rows == nullptr) {
        k_all = qkv.k;
        v_all = qkv.v;
        if (k.write_kv) {
            k.lc.k.copy_(qkv.k);
            k.lc.v.copy_(qkv.v);
        }
    } else if (k.write_kv) {
        write_rows(k.lc.k, *k.rows, qkv.k);
        write_rows(k.lc.v, *k.rows, qkv.v);
        k_all = k.lc.k;
        v_all = k.lc.v;
    } else {
        k_all = with_rows(k.lc.k, *k.rows, qkv.k);
        v_all = with_rows(k.lc.v, *k.rows, qkv.v);
    }
    if (k.reads.kept) k.reads.kept->window_rows = &k.window_rows;
    auto out = attend(qkv.q, k_all, v_all, k.reads.probs, k.some() ? &k.probs_rows : nullptr,
                      k.reads.head_mean, k.reads.kept);     // (R, H*Dh)
    if (k.reads.kept) k.reads.kept->window_rows = nullptr;  // window_rows goes now
    return out;
}

}  // namespace

torch::Tensor Transformer::attention_rows(int layer, const torch::Tensor& h, const RowSet* rows,
                                          PlanState& s, LayerCache& lc, bool write_kv,
                                          const AttentionReads& reads, QkvHeads* fresh_out,
                                          LayerRest* rest) const {
    const bool all = rows == nullptr;
    if (!all && (!s.rows_cos.defined() || s.rope_rows != rows->host)) {
        s.rope_rows = rows->host;
        s.rows_cos = rows_of(s.cos, *rows);  // (R, Dh)
        s.rows_sin = rows_of(s.sin, *rows);
    }
    const bool some = reads.probs && reads.positions && !reads.positions->empty();
    const auto probs_rows = some ? query_rows_of(*reads.positions, rows) : std::vector<int64_t>{};
    const auto window_rows = some ? window_rows_of(reads, rows) : std::vector<int64_t>{};
    if (reads.kept) *reads.kept = {};
    const LayerCall call{m_weights.layers[static_cast<size_t>(layer)],
                         m_config,
                         h,
                         rows,
                         all ? s.cos : s.rows_cos,
                         all ? s.sin : s.rows_sin,
                         lc,
                         write_kv,
                         reads,
                         fresh_out,
                         rest,
                         probs_rows,
                         window_rows};
    switch (layer_variant(call)) {
        case LayerVariant::WholeLayer:
            return whole_layer(call);
        case LayerVariant::QkvAndAttention:
            return qkv_and_attention(call);
        case LayerVariant::HeadMeanLayer:
            return head_mean_layer(call);
        case LayerVariant::FusedQkv:
            return qkv_then_attend(call, /*fused=*/true);
        case LayerVariant::OpByOp:
            break;
    }
    return qkv_then_attend(call, /*fused=*/false);
}

ProbeHeads Transformer::probe_rows(const LayerWeights& w, const PlanState& s,
                                   const LayerPlan& plan) const {
    const int64_t H = m_config.n_heads, Hkv = m_config.n_kv_heads;
    if (fits_few_rows_probe(w, s.h, H, Hkv, plan.probe_k))
        return few_rows_probe(w, s.h, plan.probe_rows.host, s.cos, s.sin, H, Hkv,
                              m_config.rms_norm_eps, plan.probe_k);
    const auto& pr = plan.probe_rows.device;
    auto xp = norm(rows_of(s.h, plan.probe_rows), w.attn_norm);  // (P, D)
    ProbeHeads out;
    out.v = split_heads(linear(xp, w.v_proj, w.v_bias), Hkv);  // (Hkv, P, Dh)
    if (plan.probe_k)                                          // (Hkv, P, Dh)
        out.k = RopeTables::apply(split_heads(linear(xp, w.k_proj, w.k_bias), Hkv),
                                  s.cos.index_select(0, pr), s.sin.index_select(0, pr));
    return out;
}

LayerResult Transformer::feature_layer(int l, const LayerPlan& plan, LayerHooks& hooks,
                                       LayerCache& lc, PlanState& s) const {
    const auto& w = m_weights.layers[static_cast<size_t>(l)];
    // h is the live residual of every row: (L, D).
    if (l == 0)
        s.h = m_weights.wte.index_select(0, s.ids);
    else if (!s.prev_all)
        throw std::logic_error("forward_plan: feature-cache layers need every row's residual");
    RowSet rows = plan.all_rows ? s.all : plan.rows;
    if (plan.probe) {
        const auto probe = probe_rows(w, s, plan);
        rows = hooks.select_rows(l, probe.k, probe.v);
    }
    const bool all = rows.size() == s.L && plan.all_rows;
    // h += out (L, D) in place: h is this forward's own tensor (an index_select, then sums), so
    // only autograd could hold it; the (L, D) sum per add was a new tensor per call before.
    const auto add_to_residual = [&](const torch::Tensor& out) {
        if (s.h.requires_grad() || out.requires_grad())
            s.h = s.h + out;
        else
            s.h.add_(out);
    };
    LayerResult r;
    if (rows.size() == 0) {
        // Nothing recomputed: every row adds its cached attention and FFN outputs.
        add_to_residual(lc.attn_out);
        add_to_residual(lc.ffn_out);
    } else {
        // Rows not computed add their cached outputs, computed rows their fresh ones. Once the
        // fresh rows are written into the cache, the cache is that merged (L, D) itself.
        // A layer that computes every row takes fresh (L, D) as its cache outright: with a copy
        // of (L, D) per output and h gathered twice, dLLM-Cache's layer 0 (recomputed at every
        // step) took about 4% longer.
        auto merge = [&](torch::Tensor& cached, const torch::Tensor& fresh) -> torch::Tensor {
            if (!cached.defined()) return fresh;  // (R, D) -> (L, D)
            if (plan.write_features) {
                if (all && fresh.sizes() == cached.sizes() && fresh.is_contiguous() &&
                    fresh.options().type_equal(cached.options()))
                    cached = fresh;
                else
                    write_rows(cached, rows, fresh);
                return cached;
            }
            return all ? fresh : with_rows(cached, rows, fresh);
        };
        QkvHeads fresh;
        const AttentionReads reads{plan.want_probs ? &r.probs : nullptr, &plan.probs_positions,
                                   plan.want_head_mean ? &r.head_mean : nullptr};
        // The computed rows' inputs: h itself where that is every row (the attention only reads
        // them).
        const auto attn = attention_rows(l, rows_of(s.h, rows), all ? nullptr : &rows, s, lc,
                                         plan.write_kv, reads, &fresh);  // (R, H*Dh)
        if (plan.want_probs) r.probs_positions = plan.probs_positions;
        r.k = fresh.k;
        r.v = fresh.v;
        if (plan.write_features && fits_few_rows_features(w, s.h, rows.size(), lc)) {
            // Each thread its computed rows' outputs (every row's too, as at layer 0), then every
            // row's residual.
            few_rows_features(w, s.h, attn, rows.host, lc, m_config.rms_norm_eps);
        } else {
            add_to_residual(merge(lc.attn_out, linear(attn, w.attn_out, {}, w.attn_out_panels)));
            auto f = gated_mlp(w, norm(rows_of(s.h, rows), w.ff_norm));  // (R, D)
            add_to_residual(merge(lc.ffn_out, f));
        }
    }
    s.prev_rows = std::move(rows);
    s.prev = all ? &s.all : &s.prev_rows;
    s.prev_all = true;  // every row's residual is live
    r.rows = all ? nullptr : &s.prev_rows;
    return r;
}

void Transformer::gather_inputs(int l, const LayerPlan& plan, const LayerCache& lc,
                                PlanState& s) const {
    const RowSet& rows = plan.all_rows ? s.all : plan.rows;
    if (l == 0) {
        s.h = token_rows(m_weights.wte, s.ids, rows);  // (R, D)
        return;
    }
    if (plan.all_rows && s.prev_all) return;                                 // h holds every row
    if (!s.prev_all && !plan.all_rows && rows.host == s.prev->host) return;  // same rows
    // Rows change between layers: a row computed at l-1 keeps its fresh state, any other row
    // comes from this layer's hidden cache (a policy that shrinks row sets needs no cache).
    const RowSet& prev = s.prev_all ? s.all : *s.prev;
    torch::Tensor full;  // (L, D)
    if (lc.hidden.defined()) {
        full = lc.hidden.clone();
    } else {
        std::vector<uint8_t> present(static_cast<size_t>(s.L), 0);
        for (int64_t i : prev.host) present[static_cast<size_t>(i)] = 1;
        for (int64_t i : rows.host)
            if (!present[static_cast<size_t>(i)])
                throw std::logic_error(
                    "forward_plan: layer " + std::to_string(l) +
                    " needs rows the previous layer did not compute and no hidden cache");
        full = torch::zeros({s.L, m_config.d_model}, s.h.options());
    }
    write_rows(full, prev, s.h);
    s.h = full.index_select(0, rows.device);
}

torch::Tensor Transformer::escalated_attention(int l, const LayerPlan& plan, const RowSet& rows,
                                               LayerCache& lc, PlanState& s, LayerResult& r,
                                               const AttentionReads& reads, QkvHeads& fresh) const {
    r.escalated = true;
    if (!lc.hidden.defined())
        throw std::logic_error("forward_plan: escalation needs a hidden cache");
    // With write_hidden the cache took the fresh rows before the attention, so it is already every
    // row's input (one copy of (L, D), not three).
    auto full = lc.hidden.clone();  // (L, D)
    if (!plan.write_hidden) write_rows(full, rows, s.h);
    s.h = full;
    return attention_rows(
        l, s.h, nullptr, s, lc, plan.write_kv,
        {&r.probs, reads.positions, reads.head_mean, reads.kept, reads.window_positions}, &fresh);
}

LayerResult Transformer::row_layer(int l, LayerPlan plan, LayerHooks& hooks, LayerCache& lc,
                                   PlanState& s) const {
    const auto& w = m_weights.layers[static_cast<size_t>(l)];
    gather_inputs(l, plan, lc, s);
    const RowSet* rows = plan.all_rows ? nullptr : &plan.rows;
    const bool keep_inputs = plan.write_hidden && lc.hidden.defined();
    LayerResult r;
    const bool may_escalate = plan.may_escalate && !plan.all_rows;
    QkvHeads fresh;  // of the computed rows
    // The fresh rows' K/V go into the cache now even when the layer may escalate: an escalated
    // layer recomputes every row from the hidden cache and then writes every row's K/V, so the
    // cache ends the same either way (deferring the write cost Elastic-Cache a copy of the whole
    // K and V cache per layer and step: index_copy + copy_, a tenth of its run).
    KeptAttention kept;
    const AttentionReads reads{(plan.want_probs || may_escalate) ? &r.probs : nullptr,
                               &plan.probs_positions, plan.want_head_mean ? &r.head_mean : nullptr,
                               plan.want_probs_mean ? &kept : nullptr, &plan.window_sum_positions};
    LayerRest rest;
    rest.few_rows = rows && fits_few_rows_layer(w, s.h, nullptr);
    rest.rows_before_go_on = !may_escalate || keep_inputs;
    rest.finishes_unasked = !may_escalate && !keep_inputs;
    if (keep_inputs && rest.few_rows && uses_row_kernels(lc.hidden) && lc.hidden.is_contiguous())
        rest.keep_inputs = lc.hidden;
    // What the policy reads of r: during the region, the kept scores there.
    const auto attention_read = [&](const KeptScores* scores) {
        if (scores)
            r.probs_mean_at = [k = *scores](int64_t p, int64_t key) { return k.mean_at(p, key); };
        if (r.probs.defined() || r.probs_mean_at) r.probs_positions = plan.probs_positions;
        r.layer = l;
        r.rows = rows;
    };
    rest.verdict = [&] {  // in the region its scores, after attend the scores it kept
        attention_read(rest.scores ? rest.scores : kept.kept ? &kept.scores : nullptr);
        return !(may_escalate && hooks.escalate(r));
    };
    auto attn = attention_rows(l, s.h, rows, s, lc, plan.write_kv, reads, &fresh, &rest);
    // Elsewhere the inputs are kept here: nothing has changed h's rows yet, and the escalation
    // starts from the hidden cache.
    if (keep_inputs && !rest.inputs_kept) write_rows(lc.hidden, rows ? *rows : s.all, s.h);
    if (!rest.go_on()) {
        r.probs_mean_at = nullptr;  // the escalated attention's reads replace the cached one's
        attn = escalated_attention(l, plan, *rows, lc, s, r, reads, fresh);
        plan.all_rows = true;
        rows = nullptr;
        attention_read(nullptr);
    }
    r.k = fresh.k;
    r.v = fresh.v;
    // s.h is this forward's own tensor (gather_inputs' gather or the previous layer's sums), so
    // the residual adds may go into it.
    if (!rest.finished) {             // else the attention's region ran them
        if (rows && rest.few_rows) {  // each thread its rows, in place
            few_rows_output_and_mlp(w, s.h, attn, m_config.rms_norm_eps);
        } else {
            s.h = add_linear(s.h, attn, w.attn_out, w.attn_out_panels);
            s.h = gated_mlp(w, norm(s.h, w.ff_norm), s.h);
        }
    }
    if (kept.kept) {  // the scores stay where they are until the next layer's attention
        if (!r.probs_mean_at) attention_read(&kept.scores);  // else the verdict's reader of them
        if (!kept.window_sums.empty()) {
            r.window_column_sums = std::move(kept.window_sums);
            r.window_sum_positions = plan.window_sum_positions;
        }
    }
    if (plan.all_rows) {
        s.prev = &s.all;
    } else {
        s.prev_rows = std::move(plan.rows);
        s.prev = &s.prev_rows;
    }
    s.prev_all = plan.all_rows;
    r.rows = plan.all_rows ? nullptr : &s.prev_rows;
    return r;
}

torch::Tensor Transformer::forward_plan(const torch::Tensor& ids, LayerHooks& hooks,
                                        std::vector<LayerCache>& cache, RowSet& out_rows) const {
    if (static_cast<int64_t>(cache.size()) != m_config.n_layers)
        throw std::logic_error("forward_plan: cache has the wrong number of layers");
    PlanState s;
    s.ids = ids;
    s.L = ids.size(0);
    std::vector<int64_t> all(static_cast<size_t>(s.L));
    std::iota(all.begin(), all.end(), int64_t{0});
    s.all.host = std::move(all);
    const auto& prefix = prefix_views(s.L);
    s.all.device = prefix.positions;  // (L)
    s.cos = prefix.cos;               // (L, Dh)
    s.sin = prefix.sin;
    for (int l = 0; l < static_cast<int>(m_config.n_layers); ++l) {
        const auto t0 = std::chrono::steady_clock::now();
        LayerPlan plan = hooks.plan(l);
        auto& lc = cache[static_cast<size_t>(l)];
        LayerResult r = plan.feature_cache ? feature_layer(l, plan, hooks, lc, s)
                                           : row_layer(l, std::move(plan), hooks, lc, s);
        r.layer = l;
        r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                   .count();
        hooks.observe(r);
    }
    out_rows = s.prev_all ? s.all : *s.prev;
    return norm(s.h, m_weights.ln_f);  // (R_last, D)
}

double layer_flops(const ModelConfig& c, int64_t rows, int64_t keys) {
    const double R = static_cast<double>(rows), K = static_cast<double>(keys);
    const double D = static_cast<double>(c.d_model), Dh = static_cast<double>(c.head_dim());
    const double H = static_cast<double>(c.n_heads), Hkv = static_cast<double>(c.n_kv_heads);
    const double F = static_cast<double>(c.mlp_hidden_size);
    const double proj = 2 * R * D * (H * Dh + 2 * Hkv * Dh) + 2 * R * H * Dh * D;  // q, k, v, out
    const double attn = 2 * 2 * H * R * K * Dh;                                    // QK^T and PV
    const double mlp = 3 * 2 * R * D * F;
    return proj + attn + mlp;
}

double probe_flops(const ModelConfig& c, int64_t rows, bool with_k) {
    const double per_projection = 2.0 * static_cast<double>(rows) * static_cast<double>(c.d_model) *
                                  static_cast<double>(c.n_kv_heads * c.head_dim());
    return with_k ? 2 * per_projection : per_projection;
}

double head_flops(const ModelConfig& c, int64_t rows) {
    return 2.0 * static_cast<double>(rows) * static_cast<double>(c.d_model) *
           static_cast<double>(c.vocab_size);
}

}  // namespace cl::detail

#include "engine/core/llada_net.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include "engine/core/errors.h"

namespace cl::detail {

std::vector<std::pair<std::string, torch::Tensor*>> LladaWeights::named() {
    std::vector<std::pair<std::string, torch::Tensor*>> out;
    out.emplace_back("model.transformer.wte.weight", &wte);
    for (size_t i = 0; i < layers.size(); ++i) {
        const std::string p = "model.transformer.blocks." + std::to_string(i) + ".";
        auto& l = layers[i];
        out.emplace_back(p + "attn_norm.weight", &l.attn_norm);
        out.emplace_back(p + "q_proj.weight", &l.q_proj);
        out.emplace_back(p + "k_proj.weight", &l.k_proj);
        out.emplace_back(p + "v_proj.weight", &l.v_proj);
        out.emplace_back(p + "attn_out.weight", &l.attn_out);
        out.emplace_back(p + "ff_norm.weight", &l.ff_norm);
        out.emplace_back(p + "ff_proj.weight", &l.ff_proj);
        out.emplace_back(p + "up_proj.weight", &l.up_proj);
        out.emplace_back(p + "ff_out.weight", &l.ff_out);
    }
    out.emplace_back("model.transformer.ln_f.weight", &ln_f);
    out.emplace_back("model.transformer.ff_out.weight", &head);
    return out;
}

LladaNet::LladaNet(ModelConfig config, LladaWeights weights, torch::Device device)
    : m_config(std::move(config)), m_weights(std::move(weights)), m_device(device) {
    const int64_t dh = m_config.head_dim();
    // inv_freq = 1 / theta^(arange(0, Dh, 2) / Dh), in float64 as LLaDA's rope_full_precision.
    auto idx = torch::arange(0, dh, 2, torch::TensorOptions().dtype(torch::kFloat64));
    m_inv_freq =
        (1.0 / torch::pow(m_config.rope_theta, idx / static_cast<double>(dh))).to(m_device);
    const int64_t table = std::min<int64_t>(m_config.max_sequence_length, 16384);
    std::tie(m_rope_cos, m_rope_sin) = rope_tables(
        torch::arange(table, torch::TensorOptions().dtype(torch::kLong).device(m_device)));
}

std::vector<torch::Tensor> LladaNet::parameters() {
    std::vector<torch::Tensor> out;
    for (auto& [name, t] : m_weights.named()) out.push_back(*t);
    return out;
}

torch::Tensor LladaNet::rms_norm(const torch::Tensor& x, const torch::Tensor& weight) const {
    // x (..., D) -> (..., D): x * rsqrt(mean(x^2) + eps) * weight, in float32.
    auto variance = x.pow(2).mean(-1, /*keepdim=*/true);
    return x * torch::rsqrt(variance + m_config.rms_norm_eps) * weight;
}

std::pair<torch::Tensor, torch::Tensor> LladaNet::rope_tables(
    const torch::Tensor& positions) const {
    // positions (T) -> freqs (T, Dh/2) -> emb (T, Dh) = cat(freqs, freqs)
    auto freqs = positions.to(torch::kFloat64).unsqueeze(1) * m_inv_freq.unsqueeze(0);
    auto emb = torch::cat({freqs, freqs}, -1);
    return {emb.cos().to(torch::kFloat32), emb.sin().to(torch::kFloat32)};
}

std::pair<torch::Tensor, torch::Tensor> LladaNet::rope_prefix(int64_t L) const {
    if (L <= m_rope_cos.size(0)) return {m_rope_cos.narrow(0, 0, L), m_rope_sin.narrow(0, 0, L)};
    return rope_tables(
        torch::arange(L, torch::TensorOptions().dtype(torch::kLong).device(m_device)));
}

torch::Tensor LladaNet::apply_rope(const torch::Tensor& x, const torch::Tensor& cos,
                                   const torch::Tensor& sin) {
    // x (..., T, Dh); rotate_half splits Dh into halves: [-x2, x1] (NeoX style).
    const int64_t half = x.size(-1) / 2;
    auto x1 = x.narrow(-1, 0, half);
    auto x2 = x.narrow(-1, half, half);
    auto rotated = torch::cat({-x2, x1}, -1);
    return x * cos + rotated * sin;
}

torch::Tensor LladaNet::mlp(int layer, const torch::Tensor& x) const {
    const auto& w = m_weights.layers[static_cast<size_t>(layer)];
    // x (..., D) -> gate, up (..., F) -> (..., D)
    auto gate = torch::silu(torch::matmul(x, w.ff_proj.t()));
    auto up = torch::matmul(x, w.up_proj.t());
    return torch::matmul(gate * up, w.ff_out.t());
}

torch::Tensor LladaNet::head(const torch::Tensor& hidden) const {
    return torch::matmul(hidden, m_weights.head.t());  // (R, D) -> (R, V)
}

torch::Tensor LladaNet::forward_full(const torch::Tensor& ids) const {
    const auto& c = m_config;
    const int64_t B = ids.size(0), L = ids.size(1), H = c.n_heads, Hkv = c.n_kv_heads,
                  Dh = c.head_dim(), D = c.d_model;
    auto h = m_weights.wte.index_select(0, ids.reshape({-1})).reshape({B, L, D});  // (B, L, D)
    auto [cos, sin] = rope_prefix(L);                                              // (L, Dh)
    const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const auto& w = m_weights.layers[static_cast<size_t>(l)];
        auto x = rms_norm(h, w.attn_norm);  // (B, L, D)
        auto q =
            torch::matmul(x, w.q_proj.t()).view({B, L, H, Dh}).transpose(1, 2);  // (B, H, L, Dh)
        auto k = torch::matmul(x, w.k_proj.t())
                     .view({B, L, Hkv, Dh})
                     .transpose(1, 2);  // (B, Hkv, L, Dh)
        auto v = torch::matmul(x, w.v_proj.t())
                     .view({B, L, Hkv, Dh})
                     .transpose(1, 2);  // (B, Hkv, L, Dh)
        q = apply_rope(q, cos, sin);
        k = apply_rope(k, cos, sin);
        if (Hkv != H) {
            k = k.repeat_interleave(H / Hkv, 1);  // (B, H, L, Dh)
            v = v.repeat_interleave(H / Hkv, 1);
        }
        auto probs =
            torch::softmax(torch::matmul(q, k.transpose(-2, -1)) * scale, -1);       // (B, H, L, L)
        auto att = torch::matmul(probs, v).transpose(1, 2).reshape({B, L, H * Dh});  // (B, L, H*Dh)
        h = h + torch::matmul(att, w.attn_out.t());
        h = h + mlp(static_cast<int>(l), rms_norm(h, w.ff_norm));
    }
    return head(rms_norm(h, m_weights.ln_f));  // (B, L, V)
}

std::vector<LayerCache> LladaNet::make_cache(int64_t seq_len, bool with_hidden) const {
    const auto& c = m_config;
    auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(m_device);
    std::vector<LayerCache> cache(static_cast<size_t>(c.n_layers));
    for (auto& lc : cache) {
        lc.k = torch::zeros({c.n_kv_heads, seq_len, c.head_dim()}, opts);
        lc.v = torch::zeros({c.n_kv_heads, seq_len, c.head_dim()}, opts);
        if (with_hidden) lc.hidden = torch::zeros({seq_len, c.d_model}, opts);
    }
    return cache;
}

torch::Tensor LladaNet::attention_rows(int layer, const torch::Tensor& x, const torch::Tensor& rows,
                                       bool all_rows, const torch::Tensor& cos_all,
                                       const torch::Tensor& sin_all, LayerCache& lc, bool write_kv,
                                       torch::Tensor* probs_out, torch::Tensor* k_out,
                                       torch::Tensor* v_out) const {
    const auto& c = m_config;
    const auto& w = m_weights.layers[static_cast<size_t>(layer)];
    const int64_t R = rows.size(0), H = c.n_heads, Hkv = c.n_kv_heads, Dh = c.head_dim();
    auto cos = all_rows ? cos_all : cos_all.index_select(0, rows);  // (R, Dh)
    auto sin = all_rows ? sin_all : sin_all.index_select(0, rows);
    auto q = apply_rope(torch::matmul(x, w.q_proj.t()).view({R, H, Dh}).transpose(0, 1), cos,
                        sin);  // (H, R, Dh)
    auto k = apply_rope(torch::matmul(x, w.k_proj.t()).view({R, Hkv, Dh}).transpose(0, 1), cos,
                        sin);                                                    // (Hkv, R, Dh)
    auto v = torch::matmul(x, w.v_proj.t()).view({R, Hkv, Dh}).transpose(0, 1);  // (Hkv, R, Dh)
    if (k_out) *k_out = k;
    if (v_out) *v_out = v;
    torch::Tensor k_all, v_all;  // (Hkv, L, Dh)
    if (all_rows) {
        k_all = k;
        v_all = v;
        if (write_kv) {
            lc.k.copy_(k);
            lc.v.copy_(v);
        }
    } else if (write_kv) {
        lc.k.index_copy_(1, rows, k);
        lc.v.index_copy_(1, rows, v);
        k_all = lc.k;
        v_all = lc.v;
    } else {
        k_all = lc.k.index_copy(1, rows, k);
        v_all = lc.v.index_copy(1, rows, v);
    }
    if (Hkv != H) {
        k_all = k_all.repeat_interleave(H / Hkv, 0);  // (H, L, Dh)
        v_all = v_all.repeat_interleave(H / Hkv, 0);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
    auto probs =
        torch::softmax(torch::matmul(q, k_all.transpose(-2, -1)) * scale, -1);  // (H, R, L)
    if (probs_out) *probs_out = probs;
    auto att = torch::matmul(probs, v_all).transpose(0, 1).reshape({R, H * Dh});  // (R, H*Dh)
    return torch::matmul(att, w.attn_out.t());                                    // (R, D)
}

torch::Tensor LladaNet::forward_plan(const torch::Tensor& ids, const PlanFn& plan,
                                     std::vector<LayerCache>& cache, const LayerObserver& observer,
                                     torch::Tensor& out_rows) const {
    const auto& c = m_config;
    const int64_t L = ids.size(0), Hkv = c.n_kv_heads, Dh = c.head_dim();
    const auto long_opts = torch::TensorOptions().dtype(torch::kLong).device(m_device);
    if (static_cast<int64_t>(cache.size()) != c.n_layers)
        throw std::logic_error("forward_plan: cache has the wrong number of layers");

    const auto all_positions = torch::arange(L, long_opts);  // (L)
    auto [cos_all, sin_all] = rope_prefix(L);                // (L, Dh)
    torch::Tensor h;          // (R_prev, D) hidden of the rows the previous layer computed
    torch::Tensor prev_rows;  // (R_prev) positions; undefined before layer 0
    bool prev_all = true;

    for (int64_t l = 0; l < c.n_layers; ++l) {
        const auto t0 = std::chrono::steady_clock::now();
        LayerPlan p = plan(static_cast<int>(l));
        const auto& w = m_weights.layers[static_cast<size_t>(l)];
        auto& lc = cache[static_cast<size_t>(l)];
        torch::Tensor probs;  // (H, R, L)
        torch::Tensor rows;   // (R)
        if (p.feature_cache) {
            // h is the live residual of every row: (L, D).
            if (l == 0) {
                h = m_weights.wte.index_select(0, ids);
            } else if (!prev_all) {
                throw std::logic_error(
                    "forward_plan: feature-cache layers need every row's residual");
            }
            rows = p.all_rows ? all_positions : p.rows;
            if (p.probe_rows.defined() && p.select) {
                auto xp = rms_norm(h.index_select(0, p.probe_rows), w.attn_norm);  // (P, D)
                auto vp = torch::matmul(xp, w.v_proj.t())
                              .view({-1, Hkv, Dh})
                              .transpose(0, 1);  // (Hkv, P, Dh)
                torch::Tensor kp;                // (Hkv, P, Dh)
                if (p.probe_k)
                    kp = apply_rope(
                        torch::matmul(xp, w.k_proj.t()).view({-1, Hkv, Dh}).transpose(0, 1),
                        cos_all.index_select(0, p.probe_rows),
                        sin_all.index_select(0, p.probe_rows));
                rows = p.select(kp, vp);
            }
            const bool all = rows.size(0) == L && p.all_rows;
            if (rows.size(0) == 0) {
                // Nothing recomputed: every row adds its cached attention and FFN outputs.
                h = h + lc.attn_out;
                h = h + lc.ffn_out;
            } else {
                auto x = rms_norm(h.index_select(0, rows), w.attn_norm);  // (R, D)
                auto attn = attention_rows(static_cast<int>(l), x, rows, all, cos_all, sin_all, lc,
                                           p.write_kv,
                                           p.want_probs ? &probs : nullptr);  // (R, D)
                auto attn_full =
                    (lc.attn_out.defined() && !all) ? lc.attn_out.index_copy(0, rows, attn) : attn;
                if (p.write_features && lc.attn_out.defined())
                    lc.attn_out.index_copy_(0, rows, attn);
                h = h + attn_full;
                auto f = mlp(static_cast<int>(l),
                             rms_norm(h.index_select(0, rows), w.ff_norm));  // (R, D)
                auto ffn_full =
                    (lc.ffn_out.defined() && !all) ? lc.ffn_out.index_copy(0, rows, f) : f;
                if (p.write_features && lc.ffn_out.defined()) lc.ffn_out.index_copy_(0, rows, f);
                h = h + ffn_full;
            }
            prev_rows = rows;
            prev_all = true;  // every row's residual is live
            if (observer) {
                LayerResult r;
                r.layer = static_cast<int>(l);
                r.rows = all ? nullptr : &prev_rows;
                r.probs = probs;
                r.ms =
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
                observer(r);
            }
            continue;
        }
        rows = p.all_rows ? all_positions : p.rows;  // (R)

        // Gather this layer's input rows.
        if (l == 0) {
            h = m_weights.wte.index_select(0, ids.index_select(0, rows));  // (R, D)
        } else if (p.all_rows && prev_all) {
            // h already holds every row.
        } else if (!prev_all && !p.all_rows && rows.size(0) == prev_rows.size(0) &&
                   torch::equal(rows, prev_rows)) {
            // Same rows as the previous layer.
        } else {
            // Rows change between layers: a row computed at l-1 keeps its fresh state, any other
            // row comes from this layer's hidden cache (a policy that shrinks row sets needs no
            // cache).
            torch::Tensor full;  // (L, D)
            if (lc.hidden.defined()) {
                full = lc.hidden.clone();
            } else {
                full = torch::zeros({L, c.d_model}, h.options());
                // Without a hidden cache the new rows must be a subset of the previous ones.
                auto present =
                    torch::zeros({L}, torch::TensorOptions().dtype(torch::kBool).device(m_device));
                present.index_fill_(0, prev_all ? all_positions : prev_rows, true);
                if (!present.index_select(0, rows).all().item<bool>())
                    throw std::logic_error(
                        "forward_plan: layer " + std::to_string(l) +
                        " needs rows the previous layer did not compute and no hidden cache");
            }
            full.index_copy_(0, prev_all ? all_positions : prev_rows, h);
            h = full.index_select(0, rows);
        }
        if (p.write_hidden && lc.hidden.defined()) lc.hidden.index_copy_(0, rows, h);

        auto x = rms_norm(h, w.attn_norm);  // (R, D)
        const bool may_escalate = static_cast<bool>(p.escalate) && !p.all_rows;
        torch::Tensor fresh_k, fresh_v;  // (Hkv, R, Dh) of the computed rows
        auto attn =
            attention_rows(static_cast<int>(l), x, rows, p.all_rows, cos_all, sin_all, lc,
                           p.write_kv && !may_escalate,
                           (p.want_probs || may_escalate) ? &probs : nullptr, &fresh_k, &fresh_v);
        bool escalated = false;
        if (may_escalate && p.escalate(probs)) {
            // Recompute the layer for every row: fresh rows keep their inputs, others come from the
            // cache.
            escalated = true;
            if (!lc.hidden.defined())
                throw std::logic_error("forward_plan: escalation needs a hidden cache");
            auto full = lc.hidden.clone();  // (L, D)
            full.index_copy_(0, rows, h);
            h = full;
            if (p.write_hidden) lc.hidden.copy_(h);
            rows = all_positions;
            p.all_rows = true;
            attn = attention_rows(static_cast<int>(l), rms_norm(h, w.attn_norm), rows, true,
                                  cos_all, sin_all, lc, p.write_kv, &probs);
        } else if (may_escalate && p.write_kv) {
            // Not escalated: store the K/V the attention above computed (deferred until now).
            lc.k.index_copy_(1, rows, fresh_k);
            lc.v.index_copy_(1, rows, fresh_v);
        }
        h = h + attn;
        h = h + mlp(static_cast<int>(l), rms_norm(h, w.ff_norm));
        prev_rows = rows;
        prev_all = p.all_rows;

        if (observer) {
            LayerResult r;
            r.layer = static_cast<int>(l);
            r.rows = p.all_rows ? nullptr : &prev_rows;
            r.escalated = escalated;
            r.probs = probs;
            r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                       .count();
            observer(r);
        }
    }
    out_rows = prev_all ? all_positions : prev_rows;
    return rms_norm(h, m_weights.ln_f);  // (R_last, D)
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

double head_flops(const ModelConfig& c, int64_t rows) {
    return 2.0 * static_cast<double>(rows) * static_cast<double>(c.d_model) *
           static_cast<double>(c.vocab_size);
}

}  // namespace cl::detail

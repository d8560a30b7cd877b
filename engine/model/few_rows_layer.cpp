#include "engine/model/few_rows_layer.h"

#include "engine/kernels/phased_region.h"
#include "engine/kernels/row_activation.h"
#include "engine/kernels/row_gemm.h"
#include "engine/kernels/row_norm_rope.h"
#include "engine/model/empty_buffer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <stdexcept>
#include <string>
#include <utility>

namespace cl::detail {

namespace {

// Fewest rows worth a thread of their own: one register tile of the product kernel's rows (AVX2's;
// AVX-512's take up to 12, row_gemm.cpp).
constexpr int64_t kMinRowsPerShare = 6;
// The fused layer's upper end (fits_few_rows_layer; the feature pass below has none): the op-by-op
// path splits products of more rows by rows anyway.
constexpr int64_t kMaxFusedRows = 128;
// Rows per pass of few_rows_features, which takes any number of rows up to every one (dLLM-Cache's
// layer 0 and refreshes): each thread's share in blocks of this many, so that the MLP's (rows, 2F)
// scratch stays in L2 (180 KB at F = 352) and no (L, D), (L, 2F) or (L, F) tensor is allocated per
// step: op by op, those landed on fresh pages at every step, since the step's record took their
// memory in between (cachelens-bench-steps, 2 threads, prints a step's page faults).
constexpr int64_t kFeatureBlockRows = 64;
// Rows per pass of few_rows_probe in each thread's share: its (rows, D + (H + 2 Hkv) Dh) scratch
// stays in L2 (98 KB at D = 128).
constexpr int64_t kProbeBlockRows = 64;
// Rows of the feature layer's residual add per task: about 32K floats at D = 128.
constexpr int64_t kRowsPerAddTask = 256;

// A tensor the fused loops read or write as plain floats.
bool cpu_float(const torch::Tensor& t) {
    return t.defined() && uses_row_kernels(t) && t.is_contiguous();
}

// w's weights, stored column-major for the row kernels, in panels (panel_copy).
bool in_panels(const torch::Tensor& w, const torch::Tensor& panels) {
    return w.defined() && cpu_float(panels) && panels.numel() == w.numel();
}

// y[:, c0:c1] (rows, N) = (or += with accumulate) x (rows, K) @ the weight whose panels these
// are, the columns [c0, c1) of it (c0 a multiple of kFewRowsTileColumns); every column by default.
void rows_product(const float* x, int64_t rows, int64_t K, const torch::Tensor& panels, int64_t N,
                  float* y, bool accumulate, int64_t c0 = 0, int64_t c1 = -1) {
    FewRowsProduct p;
    p.x = x;
    p.ldx = K;
    p.wt = panels.data_ptr<float>();
    p.panel_columns = few_rows_panel_columns();
    p.y = y;
    p.ldy = N;
    p.rows = rows;
    p.inner = K;
    p.columns = N;
    p.accumulate = accumulate;
    few_rows_product(p, c0, c1 < 0 ? N : c1);
}

// Each thread its share of rows [0, R): body(begin, end).
template <class F>
void for_row_shares(int64_t R, const F& body) {
    at::parallel_for(0, R, kMinRowsPerShare, body);
}

// Where the fresh rows' q, k, v go: (heads, R, Dh) blocks, R the step's rows.
struct QkvOut {
    float* q;  // (H, R, Dh)
    float* k;  // (Hkv, R, Dh)
    float* v;  // (Hkv, R, Dh)
    int64_t R;
};

// The kv heads [first, last) of a share, with their query heads: H / Hkv each.
struct KvHeads {
    int64_t first, last;
};

// qkv rows [b, b + n) (n, (H + 2 Hkv) Dh) -> their rows of q and k rotated, and of v, for the kv
// heads `kv` and their query heads (the other heads' columns are not read).
void scatter_heads(const float* qkv, int64_t b, int64_t n, int64_t H, int64_t Hkv, int64_t Dh,
                   const float* cos, const float* sin, const QkvOut& out, KvHeads kv) {
    const int64_t width = (H + 2 * Hkv) * Dh, g = H / Hkv;
    const auto rotate = [&](int64_t column, float* dst) {  // one head's (n, Dh) block
        RopeRows in;
        in.x = qkv + column;
        in.row_stride = width;
        in.cos = cos + b * Dh;
        in.sin = sin + b * Dh;
        in.rows = n;
        in.heads = 1;
        in.head_dim = Dh;
        rope_rows(in, dst);
    };
    for (int64_t h = kv.first * g; h < kv.last * g; ++h)
        rotate(h * Dh, out.q + (h * out.R + b) * Dh);
    for (int64_t h = kv.first; h < kv.last; ++h) rotate((H + h) * Dh, out.k + (h * out.R + b) * Dh);
    for (int64_t h = kv.first; h < kv.last; ++h)
        for (int64_t r = 0; r < n; ++r)
            std::copy_n(qkv + r * width + (H + Hkv + h) * Dh, Dh, out.v + (h * out.R + b + r) * Dh);
}

// cache (Hkv, L, Dh) rows at positions[b, b + n) = fresh (Hkv, R, Dh) rows [b, b + n), of the kv
// heads `kv` (the hidden cache (L, D): one head of D values).
void write_cache_rows(const float* fresh, float* cache, KvHeads kv, int64_t R, int64_t L,
                      int64_t Dh, const int64_t* positions, int64_t b, int64_t n) {
    for (int64_t h = kv.first; h < kv.last; ++h)
        for (int64_t r = b; r < b + n; ++r)
            std::copy_n(fresh + (h * R + r) * Dh, Dh, cache + (h * L + positions[r]) * Dh);
}

void check_positions(const char* caller, const std::vector<int64_t>& positions, int64_t R,
                     int64_t L) {
    if (static_cast<int64_t>(positions.size()) != R)
        throw std::logic_error(std::string(caller) + ": " + std::to_string(positions.size()) +
                               " positions for " + std::to_string(R) + " rows");
    for (int64_t p : positions)
        if (p < 0 || p >= L)
            throw std::out_of_range(std::string(caller) + ": position " + std::to_string(p) +
                                    " outside the " + std::to_string(L) + " rows");
}

// Floats of mlp_rows's scratch for n rows.
int64_t mlp_scratch(int64_t n, int64_t D, int64_t F) {
    return n * (D + 3 * F);
}

// y (n, D) = (or += with accumulate) the gated MLP of norm(x) with ff_norm, x (n, D); x and y may
// be the same rows.
void mlp_rows(const LayerWeights& w, const float* x, int64_t n, float eps, float* scratch, float* y,
              bool accumulate) {
    const int64_t D = w.ff_norm.size(0), F = w.ff_proj.size(0);
    float* xn = scratch;                  // (n, D)
    float* gate_up = xn + n * D;          // (n, 2F)
    float* hidden = gate_up + n * 2 * F;  // (n, F)
    rms_norm_rows(x, w.ff_norm.data_ptr<float>(), xn, n, D, eps);
    rows_product(xn, n, D, w.gate_up_panels, 2 * F, gate_up, /*accumulate=*/false);
    silu_mul_rows(gate_up, 2 * F, n, F, hidden);
    rows_product(hidden, n, F, w.ff_out_panels, D, y, accumulate);
}

// The products' weights: every one in panels, float32 on the CPU, for rows of D values.
bool weights_fit(const LayerWeights& w, int64_t D) {
    return in_panels(w.attn_out, w.attn_out_panels) && in_panels(w.ff_out, w.ff_out_panels) &&
           cpu_float(w.qkv_panels) && cpu_float(w.gate_up_panels) && cpu_float(w.attn_norm) &&
           cpu_float(w.ff_norm) &&
           w.qkv_panels.numel() == (w.q_proj.size(0) + 2 * w.k_proj.size(0)) * D &&
           w.gate_up_panels.numel() == 2 * w.ff_proj.numel();
}

// The biases' (H + 2 Hkv) Dh values in q, k, v order ((H + 2 Hkv) Dh float32), or undefined.
torch::Tensor stacked_bias(const LayerWeights& w) {
    if (!w.q_bias.defined()) return {};
    return torch::cat({w.q_bias, w.k_bias, w.v_bias}).to(torch::kFloat32).contiguous();
}

// few_rows_qkv's pass over the rows h (R, D): its fresh q, k, v (allocated), operands and the work
// of a share: rows [b, b + n) through the kv heads `kv` (and their query heads), the rows' norm,
// their q, k and v columns of those heads, bias, RoPE and the cache writes.
struct QkvPass {
    QkvPass(const char* caller, const LayerWeights& weights, const torch::Tensor& rows,
            const torch::Tensor& cos_rows, const torch::Tensor& sin_rows, int64_t heads,
            int64_t kv_heads, double norm_eps, LayerCache* kv_cache,
            const std::vector<int64_t>& row_positions)
        : w(weights),
          h(rows.data_ptr<float>()),
          bias_values(stacked_bias(weights)),
          cos_values(cos_rows.contiguous()),
          sin_values(sin_rows.contiguous()),
          cache(kv_cache),
          positions(row_positions.data()),
          H(heads),
          Hkv(kv_heads),
          Dh(weights.q_proj.size(0) / heads),
          L(kv_cache ? kv_cache->k.size(1) : 0),
          eps(static_cast<float>(norm_eps)) {
        const int64_t R = rows.size(0);
        if (cache) check_positions(caller, row_positions, R, L);
        const auto opts = rows.options();
        fresh = {empty_buffer({H, R, Dh}, opts), empty_buffer({Hkv, R, Dh}, opts),
                 empty_buffer({Hkv, R, Dh}, opts)};
        out = {fresh.q.data_ptr<float>(), fresh.k.data_ptr<float>(), fresh.v.data_ptr<float>(), R};
        bias = bias_values.defined() ? bias_values.data_ptr<float>() : nullptr;
        cos = cos_values.data_ptr<float>();
        sin = sin_values.data_ptr<float>();
    }

    const LayerWeights& w;
    const float* h;  // (R, D)
    torch::Tensor bias_values, cos_values, sin_values;
    const float* bias = nullptr;                 // ((H + 2 Hkv) Dh) or nullptr
    const float *cos = nullptr, *sin = nullptr;  // (R, Dh)
    QkvHeads fresh;                              // the rows' q, k, v
    QkvOut out{};                                // fresh's memory
    LayerCache* cache;
    const int64_t* positions;
    int64_t H, Hkv, Dh, L;
    float eps;

    void run(int64_t b, int64_t n, KvHeads kv) const {
        const int64_t D = w.attn_norm.size(0), width = (H + 2 * Hkv) * Dh, g = H / Hkv;
        float* xn = thread_scratch(static_cast<size_t>(n * (D + width)));  // (n, D)
        float* qkv = xn + n * D;                                           // (n, width)
        rms_norm_rows(h + b * D, w.attn_norm.data_ptr<float>(), xn, n, D, eps);
        // The heads' q, k and v columns: [q of kv's query heads | k of kv | v of kv], or every
        // column in one product where the share has every head.
        const bool every_head = kv.first == 0 && kv.last == Hkv;
        const std::array<std::array<int64_t, 2>, 3> columns{
            {{kv.first * g * Dh, every_head ? width : kv.last * g * Dh},
             {(H + kv.first) * Dh, (H + kv.last) * Dh},
             {(H + Hkv + kv.first) * Dh, (H + Hkv + kv.last) * Dh}}};
        for (size_t i = 0; i < (every_head ? 1U : columns.size()); ++i) {
            const auto [c0, c1] = columns[i];
            rows_product(xn, n, D, w.qkv_panels, width, qkv, /*accumulate=*/false, c0, c1);
            if (bias)
                for (int64_t r = 0; r < n; ++r)
                    for (int64_t c = c0; c < c1; ++c) qkv[r * width + c] += bias[c];
        }
        scatter_heads(qkv, b, n, H, Hkv, Dh, cos, sin, out, kv);
        if (!cache) return;
        write_cache_rows(out.k, cache->k.data_ptr<float>(), kv, out.R, L, Dh, positions, b, n);
        write_cache_rows(out.v, cache->v.data_ptr<float>(), kv, out.R, L, Dh, positions, b, n);
    }
};

// Whether few_rows_qkv gives each thread a share of the kv heads (every row) rather than of the
// rows (every head): where there are threads and heads to share and the heads' columns start on
// whole tiles. Each thread then reads only its heads' weights, and writes the q, k and v that the
// same thread's attention tasks read (attend splits its tasks by kv heads the same way), where the
// rows' shares had every q, k and v cross to the other core.
bool splits_by_kv_heads(int64_t R, int64_t H, int64_t Hkv, int64_t Dh) {
    return at::get_num_threads() >= 2 && !at::in_parallel_region() && Hkv >= 2 &&
           R >= kMinRowsPerShare && Dh % kFewRowsTileColumns == 0 &&
           (H / Hkv * Dh) % kFewRowsTileColumns == 0;
}

// Every row through the kv heads `kv`: their q/k/v pass, then their attention, on the calling
// thread (a kv head's attention reads only what its own pass wrote, so no other thread is waited
// for). The share of few_rows_qkv_attention's and few_rows_layer's regions.
void qkv_and_attention_of(const QkvPass& pass, const ColumnAttentionTasks& attention, int64_t R,
                          KvHeads kv) {
    if (kv.first == kv.last) return;
    pass.run(0, R, kv);
    const int64_t chunks = attention.chunks();
    for (int64_t n = kv.first; n < kv.last; ++n)
        for (int64_t c = 0; c < chunks; ++c) attention.run(0, n, c);
}

// Rows [b, e) of few_rows_output_and_mlp (a = attn contiguous (R, H*Dh)).
void output_and_mlp_rows(const LayerWeights& w, const torch::Tensor& h, const torch::Tensor& a,
                         double eps, int64_t b, int64_t e) {
    const int64_t D = h.size(1), A = a.size(1), F = w.ff_proj.size(0), n = e - b;
    float* rows = h.data_ptr<float>() + b * D;  // (n, D)
    float* scratch = thread_scratch(static_cast<size_t>(mlp_scratch(n, D, F)));
    rows_product(a.data_ptr<float>() + b * A, n, A, w.attn_out_panels, D, rows, true);
    mlp_rows(w, rows, n, static_cast<float>(eps), scratch, rows, /*accumulate=*/true);
}

// The rows [b, e) of R for the shares [first, last) of `shares`: as for_row_shares, at least
// kMinRowsPerShare rows a share, so shares past R / kMinRowsPerShare get none.
std::pair<int64_t, int64_t> row_share(int64_t R, int64_t first, int64_t last, int64_t shares) {
    const int64_t used = std::clamp<int64_t>(R / kMinRowsPerShare, 1, shares);
    return {R * std::min(first, used) / used, R * std::min(last, used) / used};
}

// go_on's answer, from the calling thread to the others: whether the layer goes on. One that
// throws still answers (stop), so no share waits for it forever.
class Verdict {
public:
    void give(const std::function<bool()>& go_on) {
        bool answer = false;
        try {
            answer = !go_on || go_on();
        } catch (...) {
            m_state.store(kStop, std::memory_order_release);
            throw;
        }
        m_state.store(answer ? kGoOn : kStop, std::memory_order_release);
    }
    // Waits for the answer (go_on takes a microsecond or two).
    bool await() const {
        wait_until([&] { return m_state.load(std::memory_order_acquire) != kPending; });
        return m_state.load(std::memory_order_acquire) == kGoOn;
    }
    // Whether the answer is there and is stop, without waiting.
    bool stopped() const { return m_state.load(std::memory_order_acquire) == kStop; }

private:
    static constexpr int kPending = 0, kGoOn = 1, kStop = 2;
    std::atomic<int> m_state{kPending};
};

// few_rows_layer's keep_inputs as floats, checked against the layer's rows h (R, D) and the kv
// cache's L positions; null where undefined.
float* keep_inputs_of(const torch::Tensor& keep, const torch::Tensor& h,
                      const LayerCache& kv_cache) {
    if (!keep.defined()) return nullptr;
    const int64_t L = kv_cache.k.size(1), D = h.size(1);
    if (!cpu_float(keep) || keep.dim() != 2 || keep.size(0) != L || keep.size(1) != D)
        throw std::invalid_argument(
            "few_rows_layer: the inputs are kept in " + std::to_string(keep.dim()) + "-d " +
            std::to_string(keep.numel()) + " values, not (" + std::to_string(L) + ", " +
            std::to_string(D) + ") float32 contiguous on the CPU");
    return keep.data_ptr<float>();
}

}  // namespace

bool fits_few_rows_layer(const LayerWeights& w, const torch::Tensor& h,
                         const LayerCache* kv_cache) {
    if (kv_cache && !(cpu_float(kv_cache->k) && cpu_float(kv_cache->v))) return false;
    return cpu_float(h) && h.dim() == 2 && h.size(0) >= 1 && h.size(0) < kMaxFusedRows &&
           weights_fit(w, h.size(1));
}

bool fits_few_rows_features(const LayerWeights& w, const torch::Tensor& h, int64_t rows,
                            const LayerCache& features) {
    const auto whole = [&](const torch::Tensor& t) {
        return cpu_float(t) && t.sizes() == h.sizes();
    };
    return cpu_float(h) && h.dim() == 2 && rows >= 1 && rows <= h.size(0) &&
           whole(features.attn_out) && whole(features.ffn_out) && weights_fit(w, h.size(1));
}

QkvHeads few_rows_qkv(const LayerWeights& w, const torch::Tensor& h, const torch::Tensor& cos,
                      const torch::Tensor& sin, int64_t heads, int64_t kv_heads, double eps,
                      LayerCache* kv_cache, const std::vector<int64_t>& positions) {
    const QkvPass pass("few_rows_qkv", w, h, cos, sin, heads, kv_heads, eps, kv_cache, positions);
    const int64_t R = h.size(0);
    if (splits_by_kv_heads(R, heads, kv_heads, pass.Dh)) {
        at::parallel_for(0, kv_heads, 1, [&](int64_t first, int64_t last) {
            pass.run(0, R, {first, last});
        });
    } else {
        for_row_shares(R, [&](int64_t b, int64_t e) { pass.run(b, e - b, {0, kv_heads}); });
    }
    return pass.fresh;
}

bool fuses_qkv_and_attention(const torch::Tensor& h, const LayerCache& kv_cache, int64_t heads,
                             int64_t kv_heads) {
    const int64_t Dh = kv_cache.k.size(-1);
    return h.dim() == 2 && splits_by_kv_heads(h.size(0), heads, kv_heads, Dh) &&
           uses_column_attention(h, kv_cache.k, kv_cache.v);
}

QkvAttention few_rows_qkv_attention(const LayerWeights& w, const torch::Tensor& h,
                                    const torch::Tensor& cos, const torch::Tensor& sin,
                                    int64_t heads, int64_t kv_heads, double eps,
                                    LayerCache& kv_cache, const std::vector<int64_t>& positions,
                                    torch::Tensor* probs_out,
                                    const std::vector<int64_t>* probs_rows) {
    const QkvPass pass("few_rows_qkv_attention", w, h, cos, sin, heads, kv_heads, eps, &kv_cache,
                       positions);
    const ColumnAttentionTasks attention(pass.fresh.q, kv_cache.k, kv_cache.v, probs_out != nullptr,
                                         probs_rows);
    at::parallel_for(0, kv_heads, 1, [&](int64_t first, int64_t last) {
        qkv_and_attention_of(pass, attention, h.size(0), {first, last});
    });
    return {pass.fresh, attention.result(probs_out)};
}

void few_rows_output_and_mlp(const LayerWeights& w, const torch::Tensor& h,
                             const torch::Tensor& attn, double eps) {
    const auto a = attn.contiguous();  // (R, H*Dh)
    for_row_shares(h.size(0),
                   [&](int64_t b, int64_t e) { output_and_mlp_rows(w, h, a, eps, b, e); });
}

FewRowsLayerResult few_rows_layer(const LayerWeights& w, const torch::Tensor& h,
                                  const torch::Tensor& cos, const torch::Tensor& sin, int64_t heads,
                                  int64_t kv_heads, double eps, LayerCache& kv_cache,
                                  const std::vector<int64_t>& positions, torch::Tensor* probs_out,
                                  const std::vector<int64_t>* probs_rows,
                                  const LayerMidpoint& midpoint) {
    const QkvPass pass("few_rows_layer", w, h, cos, sin, heads, kv_heads, eps, &kv_cache,
                       positions);
    const bool keep = midpoint.scores && probs_out != nullptr;
    const ColumnAttentionTasks attention =
        keep ? ColumnAttentionTasks(pass.fresh.q, kv_cache.k, kv_cache.v, probs_rows, true,
                                    midpoint.window_rows)
             : ColumnAttentionTasks(pass.fresh.q, kv_cache.k, kv_cache.v, probs_out != nullptr,
                                    probs_rows);
    const int64_t R = h.size(0), D = h.size(1), L = kv_cache.k.size(1);
    const float* inputs = h.data_ptr<float>();                               // (R, D)
    float* kept_inputs = keep_inputs_of(midpoint.keep_inputs, h, kv_cache);  // (L, D) or null
    FewRowsLayerResult out{pass.fresh, attention.result(probs_out), false, {}, {}};
    if (attention.keeps_scores()) {
        out.kept = attention.kept_scores();
        midpoint.scores(*out.kept);
    }
    Verdict verdict;
    run_in_phases(
        {[&](int64_t first, int64_t last, int64_t shares) {  // each share its kv heads
             qkv_and_attention_of(pass, attention, R,
                                  {kv_heads * first / shares, kv_heads * last / shares});
         },
         [&](int64_t first, int64_t last, int64_t shares) {  // each share its rows
             const auto [b, e] = row_share(R, first, last, shares);
             if (kept_inputs)
                 write_cache_rows(inputs, kept_inputs, {0, 1}, R, L, D, positions.data(), b, e - b);
             const bool caller = first == 0, early = !caller && midpoint.rows_before_go_on;
             if (caller) verdict.give(midpoint.go_on);
             if ((early ? !verdict.stopped() : verdict.await()) && b < e)
                 output_and_mlp_rows(w, h, out.attn, eps, b, e);
         }});
    out.finished = verdict.await();
    out.window_sums = attention.window_column_sums();  // the other threads' parts are done
    return out;
}

bool fuses_layer_with_head_mean(const torch::Tensor& h, const LayerCache& kv_cache) {
    return h.dim() == 2 && phase_shares() >= 2 && h.size(0) >= 2 * kMinRowsPerShare &&
           uses_column_attention(h, kv_cache.k, kv_cache.v);
}

HeadMeanLayer few_rows_layer_with_head_mean(const LayerWeights& w, const torch::Tensor& h,
                                            const torch::Tensor& cos, const torch::Tensor& sin,
                                            int64_t heads, int64_t kv_heads, double eps,
                                            LayerCache& kv_cache,
                                            const std::vector<int64_t>& positions) {
    const QkvPass pass("few_rows_layer_with_head_mean", w, h, cos, sin, heads, kv_heads, eps,
                       &kv_cache, positions);
    const ColumnAttentionTasks attention(pass.fresh.q, kv_cache.k, kv_cache.v, false, nullptr);
    const int64_t R = h.size(0), L = kv_cache.k.size(1);
    HeadMeanLayer out{pass.fresh, attention.result(nullptr), empty_buffer({R, L}, h.options())};
    float* mean = out.head_mean.data_ptr<float>();  // (R, L)
    run_in_phases(
        {[&](int64_t first, int64_t last, int64_t shares) {  // each share its rows, every head
             const auto [b, e] = row_share(R, first, last, shares);
             if (b < e) pass.run(b, e - b, {0, kv_heads});
         },
         [&](int64_t first, int64_t last, int64_t shares) {  // the same rows on
             const auto [b, e] = row_share(R, first, last, shares);
             if (b == e) return;
             attention.run_with_head_mean(0, b, e, mean + b * L);
             output_and_mlp_rows(w, h, out.attn, eps, b, e);
         }});
    return out;
}

bool fits_few_rows_probe(const LayerWeights& w, const torch::Tensor& h, int64_t heads,
                         int64_t kv_heads, bool with_k) {
    const int64_t Dh = w.q_proj.size(0) / heads;
    const int64_t first = (heads + (with_k ? 0 : kv_heads)) * Dh;  // the product's first column
    return cpu_float(h) && h.dim() == 2 && weights_fit(w, h.size(1)) &&
           first % kFewRowsTileColumns == 0;
}

ProbeHeads few_rows_probe(const LayerWeights& w, const torch::Tensor& h,
                          const std::vector<int64_t>& positions, const torch::Tensor& cos,
                          const torch::Tensor& sin, int64_t heads, int64_t kv_heads, double eps,
                          bool with_k) {
    const int64_t L = h.size(0), D = h.size(1), P = static_cast<int64_t>(positions.size());
    const int64_t H = heads, Hkv = kv_heads, Dh = w.q_proj.size(0) / H;
    const int64_t width = (H + 2 * Hkv) * Dh;
    const int64_t k0 = H * Dh, v0 = (H + Hkv) * Dh;  // the k and v columns' first
    check_positions("few_rows_probe", positions, P, L);
    ProbeHeads out;
    out.v = empty_buffer({Hkv, P, Dh}, h.options());
    if (with_k) out.k = empty_buffer({Hkv, P, Dh}, h.options());
    const auto bias_values = stacked_bias(w);
    const auto cos_values = cos.contiguous(), sin_values = sin.contiguous();  // (L, Dh)
    const float* bias = bias_values.defined() ? bias_values.data_ptr<float>() : nullptr;
    const float *rows = h.data_ptr<float>(), *gain = w.attn_norm.data_ptr<float>();
    const float *cos_rows = cos_values.data_ptr<float>(), *sin_rows = sin_values.data_ptr<float>();
    float* v_out = out.v.data_ptr<float>();                     // (Hkv, P, Dh)
    float* k_out = with_k ? out.k.data_ptr<float>() : nullptr;  // (Hkv, P, Dh)
    const int64_t c0 = with_k ? k0 : v0;                        // the product's first column
    const auto block = [&](int64_t b, int64_t n) {
        const int64_t* at = positions.data() + b;                          // the block's positions
        float* xn = thread_scratch(static_cast<size_t>(n * (D + width)));  // (n, D)
        float* y = xn + n * D;                                             // (n, width)
        // Normed from h in runs of consecutive positions (a response span is one run).
        for (int64_t r0 = 0, r1 = 1; r0 < n; r0 = r1++) {
            while (r1 < n && at[r1] == at[r0] + (r1 - r0)) ++r1;
            rms_norm_rows(rows + at[r0] * D, gain, xn + r0 * D, r1 - r0, D,
                          static_cast<float>(eps));
        }
        rows_product(xn, n, D, w.qkv_panels, width, y, /*accumulate=*/false, c0, width);
        if (bias)
            for (int64_t r = 0; r < n; ++r)
                for (int64_t c = c0; c < width; ++c) y[r * width + c] += bias[c];
        for (int64_t hd = 0; hd < Hkv; ++hd)
            for (int64_t r = 0; r < n; ++r) {
                const float* row = y + r * width;
                const int64_t to = (hd * P + b + r) * Dh;
                std::copy_n(row + v0 + hd * Dh, Dh, v_out + to);
                if (!k_out) continue;
                RopeRows in;  // one row: its own position's tables
                in.x = row + k0 + hd * Dh;
                in.row_stride = width;
                in.cos = cos_rows + at[r] * Dh;
                in.sin = sin_rows + at[r] * Dh;
                in.rows = 1;
                in.heads = 1;
                in.head_dim = Dh;
                rope_rows(in, k_out + to);
            }
    };
    for_row_shares(P, [&](int64_t b, int64_t e) {
        for (int64_t b0 = b; b0 < e; b0 += kProbeBlockRows)
            block(b0, std::min(e - b0, kProbeBlockRows));
    });
    return out;
}

void few_rows_features(const LayerWeights& w, const torch::Tensor& h, const torch::Tensor& attn,
                       const std::vector<int64_t>& positions, LayerCache& features, double eps) {
    const int64_t L = h.size(0), D = h.size(1), R = attn.size(0), A = attn.size(1);
    const int64_t F = w.ff_proj.size(0);
    check_positions("few_rows_features", positions, R, L);
    const auto a = attn.contiguous();  // (R, H*Dh)
    float *attn_out = features.attn_out.data_ptr<float>(),
          *ffn_out = features.ffn_out.data_ptr<float>();
    float* residual = h.data_ptr<float>();
    const auto block = [&](int64_t b, int64_t e) {
        const int64_t n = e - b;
        float* out = thread_scratch(static_cast<size_t>(2 * n * D + mlp_scratch(n, D, F)));
        float* mid = out + n * D;  // (n, D): the rows' residual after the attention
        rows_product(a.data_ptr<float>() + b * A, n, A, w.attn_out_panels, D, out, false);
        for (int64_t r = 0; r < n; ++r) {
            const int64_t at = positions[static_cast<size_t>(b + r)] * D;
            std::copy_n(out + r * D, D, attn_out + at);
            for (int64_t j = 0; j < D; ++j) mid[r * D + j] = residual[at + j] + out[r * D + j];
        }
        // out is free again: the FFN's outputs.
        mlp_rows(w, mid, n, static_cast<float>(eps), mid + n * D, out, /*accumulate=*/false);
        for (int64_t r = 0; r < n; ++r)
            std::copy_n(out + r * D, D, ffn_out + positions[static_cast<size_t>(b + r)] * D);
    };
    for_row_shares(R, [&](int64_t b, int64_t e) {
        for (int64_t b0 = b; b0 < e; b0 += kFeatureBlockRows)
            block(b0, std::min(e, b0 + kFeatureBlockRows));
    });
    // Every row's residual += its attention output, then += its FFN output (two roundings, as
    // two adds): cached rows their cached outputs, computed rows their fresh ones.
    at::parallel_for(0, L, kRowsPerAddTask, [&](int64_t b, int64_t e) {
        for (int64_t i = b * D; i < e * D; ++i)
            residual[i] = (residual[i] + attn_out[i]) + ffn_out[i];
    });
}

}  // namespace cl::detail

#include "engine/generation/policies/elastic_attention.h"

#include "engine/cuda/ranking.h"
#include "engine/generation/device_stream.h"
#include "engine/model/empty_buffer.h"

#include <numeric>

namespace cl::policies::elastic {
namespace {

// (H, R, L) float32 contiguous: on its device where the kernels run there, else on the CPU. No
// copy, and no dispatcher call, when it already is (the CPU run's probabilities): the drift test
// runs on the engine thread inside the layer's region (few_rows_layer's verdict).
torch::Tensor probs_for_reads(const torch::Tensor& probs) {
    const auto p = probs.is_cpu() || detail::runs_on_kernels(probs) ? probs : probs.to(torch::kCPU);
    return (p.scalar_type() == torch::kFloat ? p : p.to(torch::kFloat)).contiguous();
}

cuda::ProbsShape shape_of(const torch::Tensor& p) {  // p (H, R, L)
    return {p.size(0), p.size(1), p.size(2)};
}

// A host vector copied to `device` as a 1-d tensor of `type` (T's own type).
template <typename T>
torch::Tensor to_device(const std::vector<T>& v, torch::ScalarType type, torch::Device device) {
    return torch::from_blob(const_cast<T*>(v.data()), {static_cast<int64_t>(v.size())}, type)
        .to(device, type, /*non_blocking=*/false, /*copy=*/true);
}

// 0, 1, ..., W - 1: the window's rows of a (W, L) head mean computed for them.
std::vector<int32_t> identity_rows(int64_t W) {
    std::vector<int32_t> rows(static_cast<size_t>(W));
    std::iota(rows.begin(), rows.end(), 0);
    return rows;
}

// prev's window rows (W, L) float64 on `device`, in window order: the kernels read row w. Only
// a CPU run keeps the attention's own means, so on a GPU this is its (W, L) as it is.
torch::Tensor window_rows_on(const WindowAttention& prev, torch::Device device) {
    const auto W = static_cast<int64_t>(prev.attn_rows.size());
    bool in_order = prev.attn.size(0) == W;
    for (int64_t w = 0; in_order && w < W; ++w)
        in_order = prev.attn_rows[static_cast<size_t>(w)] == w;
    if (in_order) return prev.attn.to(device).contiguous();
    return prev.attn.to(device).index_select(
        0, to_device(prev.attn_rows, torch::kInt, device).to(torch::kLong));
}

}  // namespace

namespace {

// On the device: the head means' kernel, then the column sums' and the ranking's.
WindowAttention window_attention_on_device(const torch::Tensor& p, const std::vector<int32_t>& rows,
                                           const std::vector<uint8_t>& excluded, int64_t n) {
    const auto W = static_cast<int64_t>(rows.size()), L = p.size(2);
    WindowAttention out;
    out.attn = torch::empty({W, L}, p.options().dtype(torch::kFloat64));  // (W, L)
    out.attn_rows = identity_rows(W);
    if (W == 0) return out;
    const auto stream = detail::current_stream(p);
    const auto d_rows = to_device(rows, torch::kInt, p.device());  // (W)
    cuda::window_head_mean(p.data_ptr<float>(), shape_of(p), d_rows.data_ptr<int32_t>(), W,
                           out.attn.data_ptr<double>(), stream);
    // Column sums (excluded keys at -inf), then the top n of the eligible ones: the reference's
    // ranking, as the kernels' test composes them.
    const auto d_excluded = to_device(excluded, torch::kByte, p.device());    // (L)
    const auto d_eligible = d_excluded.eq(0).to(torch::kByte);                // (L)
    auto sums = torch::empty({L}, out.attn.options());                        // (L) float64
    auto chosen = torch::empty({L}, out.attn.options().dtype(torch::kByte));  // (L) 0/1
    cuda::attention_column_sums(out.attn.data_ptr<double>(), W, L, d_excluded.data_ptr<uint8_t>(),
                                sums.data_ptr<double>(), stream);
    cuda::select_top_k(sums.data_ptr<double>(), d_eligible.data_ptr<uint8_t>(), L, {.k = n},
                       chosen.data_ptr<uint8_t>(), nullptr, stream);
    const auto host = chosen.to(torch::kCPU);  // (L): waits for the kernels
    const uint8_t* c = host.data_ptr<uint8_t>();
    for (int64_t i = 0; i < L; ++i)
        if (c[i]) out.tracked.push_back(i);
    return out;
}

}  // namespace

WindowAttention window_attention(const AttentionReads& attention, const std::vector<int32_t>& rows,
                                 const std::vector<uint8_t>& excluded, int64_t n,
                                 const std::vector<double>* column_sums) {
    const bool means = attention.means.defined();  // (R, L) float64 on the CPU
    const auto p = means ? attention.means.contiguous() : probs_for_reads(attention.probs);
    if (p.is_cuda()) return window_attention_on_device(p, rows, excluded, n);  // (H, R, L)
    const auto W = static_cast<int64_t>(rows.size()), L = p.size(-1);
    WindowAttention out;
    if (W == 0) {
        out.attn = detail::empty_buffer({0, L}, p.options().dtype(torch::kFloat64));  // (0, L)
        return out;
    }
    const bool summed = means && column_sums && static_cast<int64_t>(column_sums->size()) == L;
    std::vector<double> sums(summed ? 0 : static_cast<size_t>(L));  // (L)
    if (means) {
        out.attn = p;  // (R, L): kept as it is, the window's rows where the attention put them
        out.attn_rows = rows;
        if (summed) {
            out.tracked = cuda::top_attended_keys_cpu(column_sums->data(), L, excluded.data(), n);
            return out;
        }
        cuda::window_column_sums_cpu(p.data_ptr<double>(), L, rows.data(), W, sums.data());
    } else {
        out.attn = detail::empty_buffer({W, L}, p.options().dtype(torch::kFloat64));  // (W, L)
        out.attn_rows = identity_rows(W);
        cuda::window_head_mean_cpu(p.data_ptr<float>(), shape_of(p), rows.data(), W,
                                   out.attn.data_ptr<double>(), sums.data());
    }
    out.tracked = cuda::top_attended_keys_cpu(sums.data(), L, excluded.data(), n);
    return out;
}

cuda::DriftSums drift_sums(const AttentionReads& attention, const std::vector<int32_t>& rows_now,
                           const WindowAttention& prev) {
    const auto W = static_cast<int64_t>(rows_now.size());
    const auto& tracked = prev.tracked;
    const auto n = static_cast<int64_t>(tracked.size());
    if (!prev.attn.is_cuda()) {  // a CPU run: the attention's means or probabilities
        const auto before = prev.attn.contiguous();  // (W', L) float64
        if (!attention.probs.defined() && !attention.means.defined() && attention.mean_at &&
            *attention.mean_at)
            return cuda::drift_sums_at_cpu(*attention.mean_at, before.size(1), rows_now.data(), W,
                                           before.data_ptr<double>(), tracked.data(), n,
                                           prev.attn_rows.data());
        if (attention.means.defined()) {  // (R, L) float64
            const auto means = attention.means.contiguous();
            return cuda::drift_sums_of_means_cpu(means.data_ptr<double>(), means.size(1),
                                                 rows_now.data(), W, before.data_ptr<double>(),
                                                 tracked.data(), n, prev.attn_rows.data());
        }
        const auto p = probs_for_reads(attention.probs);  // (H, R, L)
        return cuda::drift_sums_cpu(p.data_ptr<float>(), shape_of(p), rows_now.data(), W,
                                    before.data_ptr<double>(), tracked.data(), n,
                                    prev.attn_rows.data());
    }
    const auto p = probs_for_reads(attention.probs);                       // (H, R, L)
    const auto before = window_rows_on(prev, p.device());                  // (W, L) float64
    const auto d_rows = to_device(rows_now, torch::kInt, p.device());      // (W)
    const auto d_tracked = to_device(tracked, torch::kLong, p.device());   // (n)
    auto sums = torch::empty({3}, before.options());                       // dot, now², before²
    auto shared = torch::empty({1}, before.options().dtype(torch::kInt));  // rows in both steps
    cuda::drift_sums(p.data_ptr<float>(), shape_of(p), d_rows.data_ptr<int32_t>(), W,
                     before.data_ptr<double>(), d_tracked.data_ptr<int64_t>(), n,
                     sums.data_ptr<double>(), shared.data_ptr<int32_t>(),
                     detail::current_stream(p));
    const auto host_sums = sums.to(torch::kCPU), host_shared = shared.to(torch::kCPU);
    const double* s = host_sums.data_ptr<double>();
    cuda::DriftSums out;
    out.dot = s[0];
    out.now_sq = s[1];
    out.before_sq = s[2];
    out.shared = host_shared.item<int32_t>() > 0;
    return out;
}

}  // namespace cl::policies::elastic

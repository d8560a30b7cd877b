#include "engine/generation/policies/elastic_attention.h"

#include "engine/cuda/ranking.h"
#include "engine/generation/device_stream.h"

namespace cl::policies::elastic {
namespace {

// (H, R, L) float32 contiguous: on its device where the kernels run there, else on the CPU. No
// copy, and no dispatcher call, when it already is (the CPU run's probabilities).
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

// On the device: the head means' kernel, the column sums', then the ranking's.
WindowAttention window_attention_on_device(const torch::Tensor& p, const std::vector<int32_t>& rows,
                                           const std::vector<uint8_t>& excluded, int64_t n,
                                           int64_t kv_heads) {
    const auto W = static_cast<int64_t>(rows.size()), L = p.size(2);
    WindowAttention out;
    out.attn = torch::empty({W, L}, p.options().dtype(torch::kFloat64));  // (W, L)
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
    cuda::window_column_sums(p.data_ptr<float>(), shape_of(p), kv_heads, d_rows.data_ptr<int32_t>(),
                             W, d_excluded.data_ptr<uint8_t>(), sums.data_ptr<double>(), stream);
    cuda::select_top_k(sums.data_ptr<double>(), d_eligible.data_ptr<uint8_t>(), L, {.k = n},
                       chosen.data_ptr<uint8_t>(), nullptr, stream);
    const auto host = chosen.to(torch::kCPU);  // (L): waits for the kernels
    const uint8_t* c = host.data_ptr<uint8_t>();
    for (int64_t i = 0; i < L; ++i)
        if (c[i]) out.tracked.push_back(i);
    return out;
}

// this step's head mean of a row at a key on the CPU: read where the attention kept its scores,
// else from the probabilities p (H, R, L) (undefined where it kept them).
std::function<double(int64_t, int64_t)> means_on_cpu(const AttentionReads& attention,
                                                     const torch::Tensor& p) {
    if (!p.defined() && attention.mean_at && *attention.mean_at) return *attention.mean_at;
    if (!p.defined()) return {};
    return [probs = p.data_ptr<float>(), s = shape_of(p)](int64_t row, int64_t key) {
        return cuda::head_mean_cpu(probs, s, row, key);
    };
}

}  // namespace

WindowAttention window_attention(const AttentionReads& attention, const std::vector<int32_t>& rows,
                                 const std::vector<uint8_t>& excluded, int64_t n,
                                 int64_t kv_heads) {
    const auto p = attention.probs.defined() ? probs_for_reads(attention.probs) : torch::Tensor{};
    if (p.defined() && p.is_cuda())
        return window_attention_on_device(p, rows, excluded, n, kv_heads);
    const auto W = static_cast<int64_t>(rows.size());
    const auto L = static_cast<int64_t>(excluded.size());
    WindowAttention out;
    const auto mean = means_on_cpu(attention, p);
    if (W == 0 || !mean) return out;
    const bool given = !p.defined() && attention.column_sums &&
                       static_cast<int64_t>(attention.column_sums->size()) == L;
    std::vector<double> sums(given ? 0 : static_cast<size_t>(L));  // (L)
    if (!given) {
        if (!p.defined()) return out;  // neither the probabilities nor the sums: nothing tracked
        cuda::window_column_sums_cpu(p.data_ptr<float>(), shape_of(p), kv_heads, rows.data(), W,
                                     sums.data());
    }
    const double* column_sums = given ? attention.column_sums->data() : sums.data();
    out.tracked = cuda::top_attended_keys_cpu(column_sums, L, excluded.data(), n);
    const auto T = static_cast<int64_t>(out.tracked.size());
    out.before.resize(static_cast<size_t>(W * T));  // (W, T)
    for (int64_t w = 0; w < W; ++w)
        for (int64_t t = 0; t < T; ++t)
            out.before[static_cast<size_t>(w * T + t)] =
                mean(rows[static_cast<size_t>(w)], out.tracked[static_cast<size_t>(t)]);
    return out;
}

cuda::DriftSums drift_sums(const AttentionReads& attention, const std::vector<int32_t>& rows_now,
                           const WindowAttention& prev) {
    const auto W = static_cast<int64_t>(rows_now.size());
    const auto& tracked = prev.tracked;
    const auto n = static_cast<int64_t>(tracked.size());
    if (!prev.attn.defined()) {  // a CPU run: the kept scores or the probabilities
        const auto p =
            attention.probs.defined() ? probs_for_reads(attention.probs) : torch::Tensor{};
        const auto now = means_on_cpu(attention, p);
        if (!now) return {};
        return cuda::drift_sums_tracked_cpu(now, rows_now.data(), W, prev.before.data(),
                                            tracked.data(), n);
    }
    const auto p = probs_for_reads(attention.probs);                       // (H, R, L)
    const auto before = prev.attn.to(p.device()).contiguous();             // (W, L) float64
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

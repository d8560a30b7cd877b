#include "engine/generation/attention_pooling.h"

namespace cl::detail {

torch::Tensor pool_attention(const torch::Tensor& maps, const std::vector<int32_t>& positions,
                             trace::AttentionDetail detail, std::vector<int32_t>& first_positions) {
    const int64_t H = maps.size(0), R = maps.size(1), L = maps.size(2);
    const int64_t kt = std::max<int32_t>(detail.key_tile, 1),
                  rt = std::max<int32_t>(detail.row_tile, 1);
    const int64_t C = (L + kt - 1) / kt;
    auto sum = maps.to(torch::kFloat32).sum(0);                                   // (R, L)
    sum = torch::constant_pad_nd(sum, {0, C * kt - L}).view({R, C, kt}).sum(-1);  // (R, C)
    auto width = torch::full({C}, static_cast<float>(kt), sum.options());
    width[C - 1] = static_cast<float>(L - (C - 1) * kt);  // the last tile may be shorter
    // Stored rows: consecutive computed rows in the same tile of rt positions.
    first_positions.clear();
    std::vector<int64_t> group(static_cast<size_t>(R));
    for (size_t r = 0; r < positions.size(); ++r) {
        const int32_t first = positions[r] - positions[r] % static_cast<int32_t>(rt);
        if (first_positions.empty() || first_positions.back() != first)
            first_positions.push_back(first);
        group[r] = static_cast<int64_t>(first_positions.size()) - 1;
    }
    const auto G = static_cast<int64_t>(first_positions.size());
    if (G == R) return sum / (width * static_cast<float>(H));  // (R, C): every row its own
    std::vector<float> counts(static_cast<size_t>(G), 0.f);
    for (int64_t g : group) counts[static_cast<size_t>(g)] += 1.f;
    const auto cpu_long = torch::TensorOptions().dtype(torch::kInt64);
    auto index = torch::from_blob(group.data(), {R}, cpu_long).to(sum.device());
    auto n = torch::from_blob(counts.data(), {G, 1}, torch::kFloat32).to(sum.device());
    auto pooled = torch::zeros({G, C}, sum.options()).index_add_(0, index, sum);  // (G, C)
    return pooled / (n * width * static_cast<float>(H));
}

}  // namespace cl::detail

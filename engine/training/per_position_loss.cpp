#include "engine/training/per_position_loss.h"

namespace cl::detail {

torch::Tensor per_position_ce(const torch::Tensor& logits, const torch::Tensor& ids, int shift) {
    namespace F = torch::nn::functional;
    const int64_t B = ids.size(0), L = ids.size(1), V = logits.size(2);
    auto predicting = logits.narrow(1, 0, L - shift);  // (B, L - shift, V)
    auto targets = ids.narrow(1, shift, L - shift);    // (B, L - shift)
    auto ce = F::cross_entropy(predicting.reshape({-1, V}), targets.reshape({-1}),
                               F::CrossEntropyFuncOptions().reduction(torch::kNone))
                  .reshape({B, L - shift});            // (B, L - shift)
    return F::pad(ce, F::PadFuncOptions({shift, 0}));  // (B, L)
}

}  // namespace cl::detail

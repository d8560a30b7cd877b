#include "engine/model/transformer_weights.h"

namespace cl::detail {

namespace {

// (Out, In) row-major -> the same values with strides (1, Out): W^T (In, Out) is contiguous.
void to_column_major(torch::Tensor& w) {
    if (!w.defined() || w.dim() != 2) return;
    auto t = torch::empty_strided(w.sizes(), {1, w.size(0)}, w.options());
    t.copy_(w);
    w = t;
}

}  // namespace

void TransformerWeights::store_projections_column_major() {
    for (auto& l : layers)
        for (auto* t :
             {&l.q_proj, &l.k_proj, &l.v_proj, &l.attn_out, &l.ff_proj, &l.up_proj, &l.ff_out})
            to_column_major(*t);
    // A tied head is the embedding, whose rows are gathered: it stays row-major.
    if (!head.is_same(wte)) to_column_major(head);
}

}  // namespace cl::detail

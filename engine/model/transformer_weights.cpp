#include "engine/model/transformer_weights.h"

#include <initializer_list>

namespace cl::detail {

namespace {

// Matrices (Out_i, In) that one input multiplies, stored column-major one after another in one
// buffer (Out_1 + Out_2 + ..., In) with strides (1, sum Out_i): each stays its own (Out_i, In)
// tensor with W^T rows contiguous, and stacked_view sees several of them as one. A single matrix
// is simply stored column-major.
void to_column_major(std::initializer_list<torch::Tensor*> parts) {
    int64_t total = 0;
    for (auto* p : parts) total += p->size(0);
    const auto& first = **parts.begin();
    auto buffer = torch::empty_strided({total, first.size(1)}, {1, total}, first.options());
    int64_t offset = 0;
    for (auto* p : parts) {
        auto slice = buffer.narrow(0, offset, p->size(0));  // (Out_i, In), strides (1, total)
        slice.copy_(*p);
        offset += p->size(0);
        *p = slice;
    }
}

}  // namespace

void TransformerWeights::store_projections_column_major() {
    for (auto& l : layers) {
        to_column_major({&l.q_proj, &l.k_proj, &l.v_proj});
        to_column_major({&l.ff_proj, &l.up_proj});
        to_column_major({&l.attn_out});
        to_column_major({&l.ff_out});
    }
    // A tied head is the embedding, whose rows are gathered: it stays row-major.
    if (!head.is_same(wte)) to_column_major({&head});
    for (auto& l : layers) {
        if (const auto qkv = stacked_view({&l.q_proj, &l.k_proj, &l.v_proj}); qkv.defined())
            l.qkv_panels = panel_copy(qkv);
        if (const auto gate_up = stacked_view({&l.ff_proj, &l.up_proj}); gate_up.defined())
            l.gate_up_panels = panel_copy(gate_up);
        l.attn_out_panels = panel_copy(l.attn_out);
        l.ff_out_panels = panel_copy(l.ff_out);
    }
    head_panels = panel_copy(head);
}

void TransformerWeights::drop_panels() {
    for (auto& l : layers)
        for (auto* t : {&l.qkv_panels, &l.gate_up_panels, &l.attn_out_panels, &l.ff_out_panels})
            *t = torch::Tensor();
    head_panels = torch::Tensor();
}

}  // namespace cl::detail

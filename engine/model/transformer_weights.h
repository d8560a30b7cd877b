// The weights of a pre-norm decoder-style transformer, shared by every architecture.
#pragma once

#include <vector>

#include "engine/model/blocks.h"

namespace cl::detail {

struct TransformerWeights {
    torch::Tensor wte;          // (V, D) token embedding
    torch::Tensor ln_f;         // (D) final norm
    torch::Tensor head;         // (V, D) LM head (the embedding when weights are tied)
    torch::Tensor head_panels;  // panel_copy(head) for the CPU row kernels, or undefined
    std::vector<LayerWeights> layers;

    // Every defined tensor once, in checkpoint order (a tied head is the embedding).
    template <typename Fn>
    void for_each(Fn&& fn) {
        visit(*this, fn);
    }
    template <typename Fn>
    void for_each(Fn&& fn) const {
        visit(*this, fn);
    }

    // Stores every projection matrix (and an untied head) column-major: the same (Out, In)
    // tensor, with W^T contiguous. x @ W^T then reaches OpenBLAS as a plain NN product, which
    // runs its small-matrix kernel without repacking W for the few rows of a cached step, and is
    // as fast for full sequences (cachelens-bench-forward's products table). q, k and v, and the
    // MLP's gate and up projections, share one buffer each, so that stacked_view multiplies them in
    // one product. For inference only: the tensors are replaced, not updated. Then each product's
    // panel_copy where few_rows_product will run it (blocks.h: LayerWeights' *_panels,
    // head_panels).
    void store_projections_column_major();
    // Forgets the panel copies: for a copy of the weights whose tensors will be replaced or
    // updated (training, conversion), which the copies would no longer match.
    void drop_panels();

private:
    template <typename Self, typename Fn>
    static void visit(Self& w, Fn& fn) {
        fn(w.wte);
        for (auto& l : w.layers)
            for (auto* t : {&l.attn_norm, &l.q_proj, &l.k_proj, &l.v_proj, &l.q_bias, &l.k_bias,
                            &l.v_bias, &l.attn_out, &l.ff_norm, &l.ff_proj, &l.up_proj, &l.ff_out})
                if (t->defined()) fn(*t);
        fn(w.ln_f);
        if (!w.head.is_same(w.wte)) fn(w.head);
    }
};

}  // namespace cl::detail

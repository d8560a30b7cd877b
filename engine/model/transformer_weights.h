// The weights of a pre-norm decoder-style transformer, shared by every architecture.
#pragma once

#include <vector>

#include "engine/model/blocks.h"

namespace cl::detail {

struct TransformerWeights {
    torch::Tensor wte;   // (V, D) token embedding
    torch::Tensor ln_f;  // (D) final norm
    torch::Tensor head;  // (V, D) LM head (the embedding when weights are tied)
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

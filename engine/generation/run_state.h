// RunState: the sampler's state between denoising steps (tokens, masks, carried predictions,
// block position), shared by the step's stages. Torch-free.
#pragma once

#include <cstdint>
#include <vector>

namespace cl::detail {

struct RunState {
    int64_t P = 0;  // prompt length
    int64_t L = 0;  // sequence length P + G
    int64_t N = 0;  // layers
    int64_t B = 0;  // block length
    int64_t S = 0;  // steps per block

    std::vector<int32_t> x;               // (L) current tokens
    bool uniform = false;                 // uniform-noise model: no [MASK], tokens may change again
    std::vector<uint8_t> masked;          // (L) 1 = still [MASK]; uniform: not settled (the active
                                          // and later blocks), 0 once its block has finished
    std::vector<int32_t> last_committed;  // D_{t-1}
    std::vector<int32_t> carried_pred;    // (L) last prediction at a masked row, -1 if none
    std::vector<double> carried_conf;     // (L) its confidence
    std::vector<int32_t> last_compute;    // (N, L) step at which K/V were last computed, -1 never
    std::vector<int32_t> planned;         // commits known before the forward (random remasking)
    std::vector<int64_t> schedule;        // tokens to commit at each step of the current block
    std::vector<float> dream_fractions;   // Dream's schedule: 1 - s/t per step of a block (S)

    int32_t step = 0, block = 0, step_in_block = 0;
    bool block_settled = false;  // uniform: this step's predictions all equal the block's tokens

    int64_t block_start() const { return P + block * B; }
    int64_t block_end() const { return block_start() + B; }
    bool block_has_masks() const {
        for (int64_t i = block_start(); i < block_end(); ++i)
            if (masked[static_cast<size_t>(i)]) return true;
        return false;
    }
    int64_t block_masked_count() const {
        int64_t n = 0;
        for (int64_t i = block_start(); i < block_end(); ++i) n += masked[static_cast<size_t>(i)];
        return n;
    }
    int64_t masked_count() const {
        int64_t n = 0;
        for (uint8_t m : masked) n += m;
        return n;
    }
};

}  // namespace cl::detail

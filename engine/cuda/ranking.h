// Top-k selection by score, the one ranking every selection of the engine uses: eligible entries in
// descending score, ties to the lower index (a stable sort of the positions by score). The
// sampler's transfer selection (low-confidence rule: score = confidence, eligible = masked in the
// block; k from the schedule, or every score >= threshold and at least the best one),
// Elastic-Cache's most-attended keys and d2Cache's stage 1 are this.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cuda/stream.h"

namespace cl::cuda {

struct TopKRule {
    int64_t k = 0;           // how many to choose, when threshold is 0
    double threshold = 0.0;  // > 0: every eligible score >= threshold, at least the best one
};

// CPU reference. score: (n) float64; eligible: (n) 0/1, nullptr = all.
// Returns the chosen indices in rank order (best first).
std::vector<int64_t> select_top_k_cpu(const double* score, const uint8_t* eligible, int64_t n,
                                      TopKRule rule);

// On the device: score (n) float64, eligible (n) uint8 or nullptr; chosen (n) uint8 gets 1 for the
// chosen entries, 0 elsewhere; rank (n) int32 (nullptr: not wanted) gets each eligible entry's
// rank, -1 for the others. One block per call, O(n^2 / threads) comparisons, meant for n up to a
// few thousand (a block, or a sequence's keys).
void select_top_k(const double* score, const uint8_t* eligible, int64_t n, TopKRule rule,
                  uint8_t* chosen, int32_t* rank, Stream stream);

}  // namespace cl::cuda

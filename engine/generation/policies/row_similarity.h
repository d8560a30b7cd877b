// dLLM-Cache's V-verify ranking: how far each response row's fresh V (or K) has moved from the
// cached one, as the cosine of the two over every kv head's values. In float64 on the host with a
// fixed summation order, so the ranking does not depend on the instruction set or thread count,
// and sorted least similar first with ties broken by position (LibTorch's argsort of float32
// cosines ordered near-ties of masked rows, which all sit near 1, by rounding).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace cl::policies::similarity {

// fresh (Hkv, G, Dh), cached (Hkv, L, Dh): cos(fresh row g, cached row first + g) for g < G,
// x . y / (max(|x|, eps) max(|y|, eps)) over the Hkv * Dh values of each (the definition of
// torch::cosine_similarity). Loops over the floats on the CPU, a share of the rows per thread,
// tensor ops in float64 elsewhere. With replace, those rows of cached then take fresh's values
// (dLLM-Cache's V cache takes every fresh V it compared).
std::vector<double> row_cosines(const torch::Tensor& fresh, const torch::Tensor& cached,
                                int64_t first, double eps, bool replace = false);

// 0 .. G-1 ordered by ascending similarity, equal ones by index, NaN last; only the first
// `count` of that order where fewer are asked for (a partial sort: V-verify takes a quarter of
// the rows, and sorting them all was 0.6% of a dllm-cache step at 1 thread, perf).
std::vector<int64_t> least_similar_first(const std::vector<double>& similarity,
                                         size_t count = SIZE_MAX);

}  // namespace cl::policies::similarity

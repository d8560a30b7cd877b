#include "engine/generation/policies/row_similarity.h"

#include "engine/base/cpu_clones.h"
#include "engine/model/blocks.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace cl::policies::similarity {
namespace {

// Interleaved partial sums per row: value t of a head's Dh goes to sum t % kLanes. A product of
// two floats is exact in a double, so each sum's bits are the same whether it is fused into a
// multiply-add (the AVX2 and AVX-512 builds) or not.
constexpr int64_t kLanes = 8;

struct Sums {
    double dot[kLanes] = {}, fresh[kLanes] = {}, cached[kLanes] = {};
};

double total(const double (&lanes)[kLanes]) {  // a fixed pairwise order
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
           ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

[[gnu::always_inline]] inline void add_head(const float* x, const float* y, int64_t Dh, Sums& s) {
    int64_t d = 0;
    const auto add = [&](int64_t l, int64_t at) {
        const auto a = static_cast<double>(x[at]), b = static_cast<double>(y[at]);
        s.dot[l] += a * b;
        s.fresh[l] += a * a;
        s.cached[l] += b * b;
    };
    for (; d + kLanes <= Dh; d += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) add(l, d + l);
    for (int64_t l = 0; d + l < Dh; ++l) add(l, d + l);
}

double cosine(const Sums& s, double eps) {
    const double norms =
        std::max(std::sqrt(total(s.fresh)), eps) * std::max(std::sqrt(total(s.cached)), eps);
    return total(s.dot) / norms;
}

// Float32 on the CPU (the row kernels' condition) with each head's Dh values adjacent.
bool loops_fit(const torch::Tensor& fresh, const torch::Tensor& cached) {
    const auto readable = [](const torch::Tensor& t) {
        return detail::uses_row_kernels(t) && t.stride(2) == 1;
    };
    return readable(fresh) && readable(cached);
}

// Cloned per instruction set: the lanes vectorise (same bits on each, see kLanes).
CL_CPU_CLONES std::vector<double> cosines_by_loops(const torch::Tensor& fresh,
                                                   const torch::Tensor& cached, int64_t first,
                                                   double eps) {
    const int64_t H = fresh.size(0), G = fresh.size(1), Dh = fresh.size(2);
    const float* x = fresh.data_ptr<float>();   // (H, G, Dh), any strides but Dh's
    const float* y = cached.data_ptr<float>();  // (H, L, Dh), likewise
    std::vector<double> out(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g) {
        Sums s;
        for (int64_t h = 0; h < H; ++h)
            add_head(x + h * fresh.stride(0) + g * fresh.stride(1),
                     y + h * cached.stride(0) + (first + g) * cached.stride(1), Dh, s);
        out[static_cast<size_t>(g)] = cosine(s, eps);
    }
    return out;
}

std::vector<double> cosines_by_tensors(const torch::Tensor& fresh, const torch::Tensor& cached,
                                       int64_t first, double eps) {
    const int64_t G = fresh.size(1);
    const auto flat = [G](const torch::Tensor& t) {  // (H, G, Dh) -> (G, H*Dh) float64
        return t.to(torch::kFloat64).transpose(0, 1).reshape({G, -1});
    };
    const auto sims = torch::cosine_similarity(flat(fresh), flat(cached.narrow(1, first, G)), 1,
                                               eps)
                          .to(torch::kCPU)
                          .contiguous();  // (G) float64
    const double* s = sims.data_ptr<double>();
    return {s, s + G};
}

}  // namespace

std::vector<double> row_cosines(const torch::Tensor& fresh, const torch::Tensor& cached,
                                int64_t first, double eps) {
    if (fresh.dim() != 3 || cached.dim() != 3 || fresh.size(0) != cached.size(0) ||
        fresh.size(2) != cached.size(2) || first < 0 || first + fresh.size(1) > cached.size(1))
        throw std::invalid_argument(
            "row_cosines: fresh (Hkv, G, Dh) rows must lie in cached "
            "(Hkv, L, Dh) from row first");
    return loops_fit(fresh, cached) ? cosines_by_loops(fresh, cached, first, eps)
                                    : cosines_by_tensors(fresh, cached, first, eps);
}

std::vector<int64_t> least_similar_first(const std::vector<double>& similarity) {
    std::vector<int64_t> order(similarity.size());
    std::iota(order.begin(), order.end(), 0);
    // NaN (a row of NaN values) after every number, as LibTorch's argsort puts it: a strict weak
    // order, which a plain < is not once a NaN is among the keys.
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const double x = similarity[static_cast<size_t>(a)], y = similarity[static_cast<size_t>(b)];
        if (std::isnan(x) || std::isnan(y)) return !std::isnan(x) && std::isnan(y);
        return x < y;
    });
    return order;
}

}  // namespace cl::policies::similarity

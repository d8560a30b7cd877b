#include "engine/generation/policies/row_similarity.h"

#include "engine/base/cpu_clones.h"
#include "engine/kernels/row_lanes.h"
#include "engine/model/blocks.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

namespace cl::policies::similarity {
namespace {

using cl::detail::row_lanes::Doubles;
using cl::detail::row_lanes::Floats;
using cl::detail::row_lanes::load;
using cl::detail::row_lanes::to_doubles;

// Interleaved partial sums per row: value t of a head's Dh goes to sum t % kLanes. A product of
// two floats is exact in a double, so each sum's bits are the same whether it is fused into a
// multiply-add (the AVX2 and AVX-512 builds) or not, at every vector width.
constexpr int kLanes = 8;

// A row's kLanes sums of each product as kLanes / D vectors of D doubles (lane l: vector l / D,
// element l % D).
template <int D>
struct Sums {
    static constexpr int kVectors = kLanes / D;
    Doubles<D> dot[kVectors] = {}, fresh[kVectors] = {}, cached[kVectors] = {};
};

template <int D>
double total(const Doubles<D> (&vectors)[kLanes / D]) {  // a fixed pairwise order over the lanes
    double l[kLanes];
    __builtin_memcpy(l, vectors, sizeof l);
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// One head's Dh values of a fresh row x and its cached row y, D floats widened at a time.
template <int D>
[[gnu::always_inline]] inline void add_head(const float* x, const float* y, int64_t Dh,
                                            Sums<D>& s) {
    int64_t d = 0;
    for (; d + kLanes <= Dh; d += kLanes)
        for (int v = 0; v < Sums<D>::kVectors; ++v) {
            const auto a = to_doubles<D>(load<Floats<D>>(x + d + v * D));
            const auto b = to_doubles<D>(load<Floats<D>>(y + d + v * D));
            s.dot[v] += a * b;
            s.fresh[v] += a * a;
            s.cached[v] += b * b;
        }
    for (int64_t l = 0; d + l < Dh; ++l) {
        const auto a = static_cast<double>(x[d + l]), b = static_cast<double>(y[d + l]);
        s.dot[l / D][l % D] += a * b;
        s.fresh[l / D][l % D] += a * a;
        s.cached[l / D][l % D] += b * b;
    }
}

template <int D>
double cosine(const Sums<D>& s, double eps) {
    const double norms =
        std::max(std::sqrt(total<D>(s.fresh)), eps) * std::max(std::sqrt(total<D>(s.cached)), eps);
    return total<D>(s.dot) / norms;
}

// Float32 on the CPU (the row kernels' condition) with each head's Dh values adjacent.
bool loops_fit(const torch::Tensor& fresh, const torch::Tensor& cached) {
    const auto readable = [](const torch::Tensor& t) {
        return detail::uses_row_kernels(t) && t.stride(2) == 1;
    };
    return readable(fresh) && readable(cached);
}

// fresh (H, G, Dh), cached (H, L, Dh): any strides but Dh's.
struct CosineRows {
    const float* x;
    const float* y;
    int64_t H, G, Dh, x_head, x_row, y_head, y_row;
};

// run<N>: N floats per register, D = N / 2 widened to a register of doubles (explicit vectors:
// GCC 12 vectorised the lanes' loop as scalar conversions and multiply-adds).
struct CosinesKernel {
    template <int N>
    [[gnu::always_inline]] static void run(const CosineRows& r, double eps, int64_t g0, int64_t g1,
                                           std::vector<double>& out) {
        constexpr int D = N / 2;
        for (int64_t g = g0; g < g1; ++g) {
            Sums<D> s;
            for (int64_t h = 0; h < r.H; ++h)
                add_head<D>(r.x + h * r.x_head + g * r.x_row, r.y + h * r.y_head + g * r.y_row,
                            r.Dh, s);
            out[static_cast<size_t>(g)] = cosine<D>(s, eps);
        }
    }
};

// With replace, cached's rows [first, first + G) take fresh's after the cosines, each thread
// copying the rows it compared: a copy on the engine thread afterwards first had to take back
// the rows the other core had just read.
std::vector<double> cosines_by_loops(const torch::Tensor& fresh, const torch::Tensor& cached,
                                     int64_t first, double eps, bool replace) {
    const CosineRows rows{
        fresh.data_ptr<float>(), cached.data_ptr<float>() + first * cached.stride(1),
        fresh.size(0),           fresh.size(1),
        fresh.size(2),           fresh.stride(0),
        fresh.stride(1),         cached.stride(0),
        cached.stride(1)};
    std::vector<double> out(static_cast<size_t>(rows.G));
    // A share of the rows per thread (each row's sums are its own, so the same bits at every
    // thread count): dLLM-Cache's 256 response rows took 12 us of a V-verify layer's 30 on the
    // engine thread, the other thread waiting.
    // About 32K floats read per task (a fresh and a cached row of H * Dh each), as blocks.cpp's
    // loops: fewer are not worth a thread.
    const int64_t rows_per_task =
        std::max<int64_t>(1, 32768 / std::max<int64_t>(2 * rows.H * rows.Dh, 1));
    at::parallel_for(0, rows.G, rows_per_task, [&](int64_t g0, int64_t g1) {
        cpu::run_at_vector_width<CosinesKernel>(rows, eps, g0, g1, out);
        if (!replace) return;
        float* to = cached.data_ptr<float>() + first * rows.y_row;
        for (int64_t h = 0; h < rows.H; ++h)
            for (int64_t g = g0; g < g1; ++g)
                std::copy_n(rows.x + h * rows.x_head + g * rows.x_row, rows.Dh,
                            to + h * rows.y_head + g * rows.y_row);
    });
    return out;
}

std::vector<double> cosines_by_tensors(const torch::Tensor& fresh, const torch::Tensor& cached,
                                       int64_t first, double eps, bool replace) {
    const int64_t G = fresh.size(1);
    const auto flat = [G](const torch::Tensor& t) {  // (H, G, Dh) -> (G, H*Dh) float64
        return t.to(torch::kFloat64).transpose(0, 1).reshape({G, -1});
    };
    const auto sims = torch::cosine_similarity(flat(fresh), flat(cached.narrow(1, first, G)), 1,
                                               eps)
                          .to(torch::kCPU)
                          .contiguous();  // (G) float64
    if (replace) cached.narrow(1, first, G).copy_(fresh);
    const double* s = sims.data_ptr<double>();
    return {s, s + G};
}

}  // namespace

std::vector<double> row_cosines(const torch::Tensor& fresh, const torch::Tensor& cached,
                                int64_t first, double eps, bool replace) {
    if (fresh.dim() != 3 || cached.dim() != 3 || fresh.size(0) != cached.size(0) ||
        fresh.size(2) != cached.size(2) || first < 0 || first + fresh.size(1) > cached.size(1))
        throw std::invalid_argument(
            "row_cosines: fresh (Hkv, G, Dh) rows must lie in cached "
            "(Hkv, L, Dh) from row first");
    return loops_fit(fresh, cached) ? cosines_by_loops(fresh, cached, first, eps, replace)
                                    : cosines_by_tensors(fresh, cached, first, eps, replace);
}

std::vector<int64_t> least_similar_first(const std::vector<double>& similarity, size_t count) {
    // NaN (a row of NaN values) after every number, as LibTorch's argsort puts it, and equal ones
    // by index: a strict total order (a plain < is not one once a NaN is among the keys), so the
    // selection's first `count` are the full sort's. The keys are made once, so no comparison
    // tests for NaN (the full sort and the mean took 9.3 us of a V-verify layer, this 5.8).
    struct Key {
        bool nan;
        double value;
        int64_t index;
        bool operator<(const Key& o) const {
            return std::tie(nan, value, index) < std::tie(o.nan, o.value, o.index);
        }
    };
    std::vector<Key> keys;
    keys.reserve(similarity.size());
    for (size_t i = 0; i < similarity.size(); ++i) {
        const bool nan = std::isnan(similarity[i]);
        keys.push_back({nan, nan ? 0.0 : similarity[i], static_cast<int64_t>(i)});
    }
    count = std::min(count, keys.size());
    const auto end = keys.begin() + static_cast<std::ptrdiff_t>(count);
    if (count < keys.size()) std::nth_element(keys.begin(), end, keys.end());
    std::sort(keys.begin(), end);
    std::vector<int64_t> order;
    order.reserve(count);
    for (auto k = keys.begin(); k != end; ++k) order.push_back(k->index);
    return order;
}

}  // namespace cl::policies::similarity

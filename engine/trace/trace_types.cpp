#include "engine/trace/trace_types.h"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace cl::trace {

double StepRecord::recompute_fraction() const {
    if (actions.empty()) return 0.0;
    size_t computed = 0;
    for (RowAction a : actions) computed += (a == RowAction::Recomputed);
    return static_cast<double>(computed) / static_cast<double>(actions.size());
}

namespace {

// The largest finite-or-infinite positive value of x[0..n); NaN and negatives are skipped, an
// all-nonpositive row gives 0. (maxps returns its second operand when the first is NaN.)
float positive_max(const float* x, size_t n) {
    float mx = 0.f;
    size_t c = 0;
#if defined(__SSE2__)
    __m128 m0 = _mm_setzero_ps(), m1 = _mm_setzero_ps();
    for (; c + 8 <= n; c += 8) {
        m0 = _mm_max_ps(_mm_loadu_ps(x + c), m0);
        m1 = _mm_max_ps(_mm_loadu_ps(x + c + 4), m1);
    }
    float lanes[4];
    _mm_storeu_ps(lanes, _mm_max_ps(m0, m1));
    for (float v : lanes) mx = v > mx ? v : mx;
#endif
    for (; c < n; ++c) mx = x[c] > mx ? x[c] : mx;
    return mx;
}

// out[c] = round(clamp(x[c] * k, 0, 255)); NaN reads as 0 (maxps with 0 as second operand).
void quantize_row(const float* x, size_t n, float k, uint8_t* out) {
    size_t c = 0;
#if defined(__SSE2__)
    const __m128 vk = _mm_set1_ps(k), zero = _mm_setzero_ps(), top = _mm_set1_ps(255.f),
                 half = _mm_set1_ps(0.5f);
    for (; c + 16 <= n; c += 16) {
        __m128i q[4];
        for (int j = 0; j < 4; ++j) {
            __m128 y = _mm_mul_ps(_mm_loadu_ps(x + c + 4 * static_cast<size_t>(j)), vk);
            y = _mm_min_ps(_mm_max_ps(y, zero), top);
            q[j] = _mm_cvttps_epi32(_mm_add_ps(y, half));
        }
        const __m128i lo = _mm_packs_epi32(q[0], q[1]), hi = _mm_packs_epi32(q[2], q[3]);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c), _mm_packus_epi16(lo, hi));
    }
#endif
    for (; c < n; ++c) {
        const float y = x[c] * k;  // NaN fails both tests -> 0
        // y is clamped to [0, 255] first, so + 0.5 and truncation round half up, as the SIMD
        // path (cvtt of y + 0.5) does; lround would differ from it at exact halves.
        // NOLINTBEGIN(bugprone-incorrect-roundings)
        out[c] = static_cast<uint8_t>((y > 0.f ? (y < 255.f ? y : 255.f) : 0.f) + 0.5f);
        // NOLINTEND(bugprone-incorrect-roundings)
    }
}

}  // namespace

void AttentionMap::set_head_mean(const float* p, int32_t heads) {
    const size_t n_rows = static_cast<size_t>(std::max(rows, 0)),
                 n_cols = static_cast<size_t>(std::max(cols, 0));
    const size_t n_heads = static_cast<size_t>(std::max(heads, 1));
    const size_t plane = n_rows * n_cols;
    row_scale.assign(n_rows, 0.f);
    levels.resize(plane);
    // One row of the head sum; thread_local so that the engine thread allocates it once.
    thread_local std::vector<float> sum;
    sum.resize(n_cols);
    for (size_t r = 0; r < n_rows; ++r) {
        const float* first = p + r * n_cols;
        const float* row = first;
        if (n_heads > 1) {
            std::copy(first, first + n_cols, sum.begin());
            for (size_t h = 1; h < n_heads; ++h) {
                const float* ph = first + h * plane;
                for (size_t c = 0; c < n_cols; ++c) sum[c] += ph[c];
            }
            row = sum.data();
        }
        float mx = positive_max(row, n_cols);
        if (!(mx < 3.4e38f)) mx = 0.f;  // +inf: the row reads as 0
        row_scale[r] = mx / static_cast<float>(n_heads);
        quantize_row(row, n_cols, mx > 0 ? 255.f / mx : 0.f, levels.data() + r * n_cols);
    }
}

int32_t AttentionMap::row_of(int32_t position) const {
    if (position < 0 || row_tile < 1) return -1;
    const int32_t first = position - position % row_tile;
    const auto it = std::lower_bound(row_index.begin(), row_index.end(), first);
    if (it == row_index.end() || *it != first) return -1;
    return static_cast<int32_t>(it - row_index.begin());
}

float AttentionMap::prob_at(int32_t position, int32_t key) const {
    const int32_t r = row_of(position), c = column_of(key);
    if (r < 0 || c < 0 || r >= rows || c >= cols) return std::numeric_limits<float>::quiet_NaN();
    return prob(r, c);
}

std::string AttentionMap::describe() const {
    if (full_resolution()) return "full resolution";
    if (row_tile == 1) return "computed rows, keys in tiles of " + std::to_string(key_tile);
    return std::to_string(row_tile) + "x" + std::to_string(key_tile) + " tiles";
}

void AttentionMap::set_pooled_head_mean(const float* p, int32_t heads,
                                        const std::vector<int32_t>& positions) {
    const size_t R = positions.size(), L = static_cast<size_t>(std::max(keys, 0));
    const size_t n_heads = static_cast<size_t>(std::max(heads, 1));
    const size_t kt = static_cast<size_t>(std::max(key_tile, 1));
    const int32_t rt = std::max(row_tile, 1);
    cols = static_cast<int32_t>((L + kt - 1) / kt);
    const size_t C = static_cast<size_t>(cols), plane = R * L;
    row_index.clear();
    row_scale.clear();
    levels.clear();
    thread_local std::vector<float> head_sum, cell_sum;
    head_sum.resize(L);
    cell_sum.assign(C, 0.f);
    size_t in_group = 0;
    // Turns the group's sums into means, quantised as set_head_mean quantises a row.
    auto flush = [&](int32_t first) {
        for (size_t c = 0; c < C; ++c) {
            const size_t width = std::min(kt, L - c * kt);
            cell_sum[c] /= static_cast<float>(n_heads * width * in_group);
        }
        float mx = positive_max(cell_sum.data(), C);
        if (!(mx < 3.4e38f)) mx = 0.f;
        row_index.push_back(first);
        row_scale.push_back(mx);
        levels.resize(levels.size() + C);
        quantize_row(cell_sum.data(), C, mx > 0 ? 255.f / mx : 0.f,
                     levels.data() + levels.size() - C);
        std::fill(cell_sum.begin(), cell_sum.end(), 0.f);
        in_group = 0;
    };
    int32_t group = -1;
    for (size_t r = 0; r < R; ++r) {
        const int32_t first = positions[r] - positions[r] % rt;
        if (in_group > 0 && first != group) flush(group);
        group = first;
        const float* row = p + r * L;
        std::copy(row, row + L, head_sum.begin());
        for (size_t h = 1; h < n_heads; ++h) {
            const float* ph = row + h * plane;
            for (size_t k = 0; k < L; ++k) head_sum[k] += ph[k];
        }
        for (size_t c = 0; c < C; ++c) {
            float s = 0.f;
            for (size_t k = c * kt, end = std::min(L, k + kt); k < end; ++k) s += head_sum[k];
            cell_sum[c] += s;
        }
        ++in_group;
    }
    if (in_group > 0) flush(group);
    rows = static_cast<int32_t>(row_index.size());
}

}  // namespace cl::trace

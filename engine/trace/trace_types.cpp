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

}  // namespace cl::trace

// The CPU attention in float32, one kv head's query rows (a chunk of them) at a time. Written for
// a cached step's few dozen query rows against hundreds of keys: as (rows, keys) products OpenBLAS
// packs the keys at every call (sgemm_incopy) for a few dozen rows, and each score row's softmax is
// a pass of its own. Here the product runs the other way round, scores^T (L, Rq) = K (L, Dh) @
// q^T (Dh, Rq), through few_rows_product with the keys as its rows (read in place) and the query
// rows as its 8- to 32-wide column tiles; the softmax then goes down the columns, a vector of
// queries at a time with no horizontal reduction, and the probabilities times the values read the
// scores transposed (FewRowsProduct::ldxk). The same holds on full sequences and with the
// probabilities kept, so blocks.cpp's attend runs it for every CPU float32 attention on LibTorch
// 1.13 (cachelens-bench-forward times the forward against sequence length).
// No torch here: plain floats, so the test holds it against a float64 attention.
#pragma once

#include <cstdint>

namespace cl::detail {

struct ColumnAttention {
    // Query rows of the `heads` query heads that share this kv head, already rotated: head j's row
    // r at q + j * q_head_stride + r * q_row_stride, Dh values each.
    const float* q = nullptr;
    int64_t q_head_stride = 0, q_row_stride = 0;
    const float* k = nullptr;  // (L, Dh), row stride k_row_stride
    const float* v = nullptr;  // (L, Dh), row stride v_row_stride
    int64_t k_row_stride = 0, v_row_stride = 0;
    // softmax(q k^T scale) v: head j's row r at out + j * out_head_stride + r * out_row_stride.
    float* out = nullptr;
    int64_t out_head_stride = 0, out_row_stride = 0;
    // Optional, the probabilities: head j's row r at probs + j * probs_head_stride + r * keys
    // (L floats each), or, with probs_slot, at slot probs_slot[r] in place of r and not at all
    // where that is -1 (a caller that reads a few rows' probabilities).
    float* probs = nullptr;
    int64_t probs_head_stride = 0;
    const int64_t* probs_slot = nullptr;  // (R) or nullptr
    int64_t heads = 0;                    // g query heads per kv head
    int64_t rows = 0;                     // R query rows per head
    int64_t keys = 0;                     // L
    int64_t head_dim = 0;                 // Dh
    float scale = 1.0F;  // 1/sqrt(Dh), applied to score - column max inside the exp
};

// exp(x) for x in [-87, 0], the softmax's exp (row_exp.h; below -87 it returns about 1.6e-38
// instead of a denormal or 0), relative error below 1e-7 (8.3e-8 measured; libm's expf 6.0e-8):
// Cephes' expf polynomial on the reduced argument, not libm's one-ulp expf, which was most of
// LibTorch 1.13's softmax time in a long forward.
float softmax_exp(float x);

// The score columns (g x R query rows) are padded to a multiple of 8: on AVX-512 16-float vectors,
// then an 8-float one where 8 columns are left (a cached step's 22 queries of a head take 24
// columns, not 32); 8 is a whole number of AVX2's and SSE2's vectors. The padding costs as much as
// real rows, so it is kept to the narrowest vector.
constexpr int64_t kColumnPadding = 8;

// Floats of scratch column_attention needs for these sizes.
int64_t column_attention_scratch(int64_t heads, int64_t rows, int64_t keys, int64_t head_dim);

// Fills out (and probs) for one kv head; scratch holds column_attention_scratch(...) floats.
void column_attention(const ColumnAttention& a, float* scratch);

// Floats a scratch needs past column_attention_scratch's for column_head_mean to read it.
constexpr int64_t kColumnHeadMeanPadding = 16;

// The head mean of the query rows that column_attention has just taken through every kv head in
// turn, kv head n's call with scratch scratches[n], which still holds its scores and sums: the
// probabilities are read there, never written out. a: the calls' shared sizes (heads per kv head,
// rows, keys, head_dim). Query row r's float32 head mean (row_head_mean.h's: the probabilities
// summed over the heads in head order in float32, divided by H; d2Cache's rollout) goes to
// mean + r * keys.
void column_head_mean(const ColumnAttention& a, const float* const* scratches, int64_t kv_heads,
                      float* mean);

// The float32 head mean (engine/cuda/elastic_drift.h's: the probabilities summed over the heads in
// head order in float32, divided by H there, widened) of query row `row` at one key, read from
// the scratches column_head_mean reads: Elastic-Cache's drift test and tracking read a handful of
// keys of a few rows.
double column_head_mean_f32_at(const ColumnAttention& a, const float* const* scratches,
                               int64_t kv_heads, int64_t row, int64_t key);

// One kv head's part of Elastic-Cache's window column sums (engine/cuda/elastic_drift.h,
// window_column_sums_cpu): sums (keys) float64, each key's probabilities of a's heads in head
// order, each over the query rows `rows` (n_rows, ascending indices into a's rows) in order,
// widened and added from 0.0; read from the scratch column_attention left with a, on the thread
// that ran it.
void column_window_sums(const ColumnAttention& a, const float* scratch, const int64_t* rows,
                        int64_t n_rows, double* sums);

}  // namespace cl::detail

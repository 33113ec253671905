// The backward's matrix products on the AVX-512 kernel of x86_f32_gemm.cpp,
// which multiplies packed activation rows by weight rows read as stored
// (y = x W^T). The backward's products have a transposed operand
// (dx = dy W, dW = dy^T x): the operands are laid out once per call into
// arena workspace (a transpose, or a packing that reads columns), so that
// every product runs at the forward's rate with no packing per block.
#pragma once

#include <cstdint>

#include "ops/cpu/x86_kernels.h"
#include "ssm/core/thread_pool.h"

namespace ssm::cpu {

// Packs blocks [b0, b1) of the rows of a^T, where a has `rows` rows of
// `cols` (row stride lda): the packed matrix has cols rows of length rows,
// in the layout of pack_f32_rows (blocks of 16 packed rows: for each k the
// 16 values a[k][16 b + l], zeros past cols). Blocks can be packed in
// parallel; the result is whole once all are.
F32PackedRows pack_f32_columns(const float* a, int64_t lda, int64_t rows, int64_t cols,
                               void* workspace, int64_t b0, int64_t b1);

// pack_f32_rows and pack_f32_columns over all blocks, split over the pool;
// the packed matrix they return is whole.
F32PackedRows pack_f32_rows_parallel(ThreadPool& pool, const float* x, int64_t ldx, int64_t M,
                                     int64_t K, void* workspace);
F32PackedRows pack_f32_columns_parallel(ThreadPool& pool, const float* a, int64_t lda, int64_t rows,
                                        int64_t cols, void* workspace);

// out (cols rows of `rows`, dense) = a^T for a of `rows` rows of `cols`
// (row stride lda), split over the pool by blocks of output rows. Requires
// cpu_has_avx512().
void transpose_f32(ThreadPool& pool, const float* a, int64_t lda, int64_t rows, int64_t cols,
                   float* out);

// y (M rows, row stride ldy) (+)= x (packed, M rows of K) times the N rows
// of W (row stride K, dense)^T, split over the pool by blocks of W's rows
// handed out as the threads come free (parallel_for_dynamic): each output is
// one F32 sum over k in order, whichever block or thread computes it. A
// static split left one thread idle for a twentieth of the in_proj
// product (35 blocks of 96 rows: 18 against 16 and a part) and for
// whatever another program took from the other core.
void packed_product(ThreadPool& pool, const F32PackedRows& x, const float* W, int64_t N,
                    bool accumulate, float* y, int64_t ldy);

// The same sums written transposed: y[n][m] (+)= sum_k W[n][k] x[m][k] for
// the N rows of W (row stride ldw) and the M packed rows of x; y has N rows
// (row stride ldy). dx = dy W as (W^T packed, from W's columns) times dy's
// rows as stored: dy needs no packing, and each sum is the one of
// packed_product(dy packed, W^T) (the same products in the same order).
void packed_product_transposed(ThreadPool& pool, const F32PackedRows& x, const float* W,
                               int64_t ldw, int64_t N, bool accumulate, float* y, int64_t ldy);

}  // namespace ssm::cpu

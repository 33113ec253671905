// Matrix products through OpenBLAS. Work is split across the pool by rows (or
// by output columns when there are few rows), each part one single-threaded
// BLAS call, so the pool is the only source of parallelism.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

// y[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]); W is a Linear weight (out, in).
// ldx / ldy are row strides (0: dense).
void linear(const float* x, int64_t M, int64_t K, const float* W, int64_t N, const float* bias,
            float* y, ThreadPool& pool, int64_t ldx = 0, int64_t ldy = 0);

// C[M, N] = alpha * op(A) @ op(B) + beta * C on the calling thread, for small
// products inside kernels. lda/ldb/ldc are row strides.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc);

}  // namespace ssm::ops

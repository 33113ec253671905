// Small matrix products inside cpu kernels, on the calling thread: OpenBLAS
// is kept single-threaded so that the context's pool is the one source of
// parallelism and cores are never oversubscribed.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// C[M, N] = alpha op(A) op(B) + beta C; lda/ldb/ldc are row strides.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc);
// y[N] = alpha W[N, K] x[K] + beta y; W has row stride ldw.
void gemv(int64_t N, int64_t K, float alpha, const float* W, int64_t ldw, const float* x,
          float beta, float* y);

}  // namespace ssm::cpu

// Small matrix products inside cpu kernels, on the calling thread: OpenBLAS
// is kept single-threaded so that the context's pool is the one source of
// parallelism and cores are never oversubscribed.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ssm::cpu {

// C[M, N] = alpha op(A) op(B) + beta C; lda/ldb/ldc are row strides.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// C[M, N] = A B for A (M, M) causal by steps of `unit` rows: row r is zero
// past column (r / unit + 1) unit - 1 (a chunk's masked scores, unit = the
// rows per time step). Rows go in blocks of kCausalRows, each over the
// columns up to its last nonzero one (causal_columns), which skips about a
// third of the multiply-adds of a 64-step chunk; the terms skipped are exact
// zeros, so each sum is the full product's (up to the sign of a zero). Only
// the columns causal_columns(r) of row r are read: the zeros past the
// diagonal need be written only that far.
inline constexpr int64_t kCausalRows = 16;
inline int64_t causal_columns(int64_t r, int64_t M, int64_t unit) {
  const int64_t r1 = std::min(M, (r / kCausalRows + 1) * kCausalRows);
  return std::min(M, (r1 + unit - 1) / unit * unit);
}
inline void gemm_causal(int64_t M, int64_t N, int64_t unit, const float* A, int64_t lda,
                        const float* B, int64_t ldb, float* C, int64_t ldc) {
  for (int64_t r0 = 0; r0 < M; r0 += kCausalRows) {
    const int64_t r1 = std::min(M, r0 + kCausalRows);
    gemm(false, false, r1 - r0, N, causal_columns(r0, M, unit), 1.f, A + r0 * lda, lda, B, ldb, 0.f,
         C + r0 * ldc, ldc);
  }
}

// C[M, M] = A B^T (A and B: M rows of K) only where gemm_causal reads it
// when C is its causal A: row blocks of kCausalRows, each over the columns up
// to causal_columns (a chunk's scores, whose blocks above the diagonal are
// masked anyway). The rest of C is not written. About half the
// multiply-adds of the full product for a chunk of 256 rows, 0.6 of them
// for 64; each entry written is the full product's.
bool small_causal_scores(int64_t M, int64_t K, int64_t unit, const float* A, int64_t lda,
                         const float* B, int64_t ldb, float* C, int64_t ldc);
inline void gemm_causal_scores(int64_t M, int64_t K, int64_t unit, const float* A, int64_t lda,
                               const float* B, int64_t ldb, float* C, int64_t ldc) {
  // With AVX-512 (x86_small_gemm.cpp), B is transposed once for all blocks.
  if (small_causal_scores(M, K, unit, A, lda, B, ldb, C, ldc)) return;
  for (int64_t r0 = 0; r0 < M; r0 += kCausalRows) {
    const int64_t r1 = std::min(M, r0 + kCausalRows);
    gemm(false, true, r1 - r0, causal_columns(r0, M, unit), K, 1.f, A + r0 * lda, lda, B, ldb, 0.f,
         C + r0 * ldc, ldc);
  }
}

// The backward's products with a lower-triangular A (M, M), zero past the
// diagonal (a chunk's decayed scores or their gradient): rows of C in
// blocks of kCausalRows, each summing over the k where its rows of A can be
// nonzero only. The terms skipped are exact zeros at the start (transposed)
// or the end (plain) of each sum, so every sum is the full product's (up to
// the sign of a zero), in the same order, for about half the multiply-adds.
// C += A B:
inline void gemm_lower_add(int64_t M, int64_t N, const float* A, int64_t lda, const float* B,
                           int64_t ldb, float* C, int64_t ldc) {
  for (int64_t r0 = 0; r0 < M; r0 += kCausalRows) {
    const int64_t r1 = std::min(M, r0 + kCausalRows);
    gemm(false, false, r1 - r0, N, r1, 1.f, A + r0 * lda, lda, B, ldb, 1.f, C + r0 * ldc, ldc);
  }
}
// C += A^T B (row r of C sums over the rows k >= r of A and B):
inline void gemm_lower_transposed_add(int64_t M, int64_t N, const float* A, int64_t lda,
                                      const float* B, int64_t ldb, float* C, int64_t ldc) {
  for (int64_t r0 = 0; r0 < M; r0 += kCausalRows) {
    const int64_t r1 = std::min(M, r0 + kCausalRows);
    gemm(true, false, r1 - r0, N, M - r0, 1.f, A + r0 * lda + r0, lda, B + r0 * ldb, ldb, 1.f,
         C + r0 * ldc, ldc);
  }
}

// y[N] = alpha W[N, K] x[K] + beta y; W has row stride ldw.
void gemv(int64_t N, int64_t K, float alpha, const float* W, int64_t ldw, const float* x,
          float beta, float* y);

}  // namespace ssm::cpu

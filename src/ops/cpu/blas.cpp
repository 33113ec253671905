#include "ops/cpu/blas.h"

#include <cblas.h>

#include <mutex>

#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {
namespace {

void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  single_threaded_blas();
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  // The scans' small products: OpenBLAS's packing costs about as much as
  // their multiply-adds (x86_small_gemm.cpp).
  if (small_gemm_fits(trans_b, M, N, K) && cpu_has_avx512()) {
    small_gemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(M), static_cast<blasint>(N),
              static_cast<blasint>(K), alpha, A, static_cast<blasint>(lda), B,
              static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
}

void gemv(int64_t N, int64_t K, float alpha, const float* W, int64_t ldw, const float* x,
          float beta, float* y) {
  if (N == 0) return;
  single_threaded_blas();
  if (K == 0) {
    for (int64_t i = 0; i < N; ++i) y[i] = beta == 0.f ? 0.f : beta * y[i];
    return;
  }
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(N), static_cast<blasint>(K), alpha,
              W, static_cast<blasint>(ldw), x, 1, beta, y, 1);
}

}  // namespace ssm::cpu

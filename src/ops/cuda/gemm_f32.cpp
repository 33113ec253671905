#include "ops/cuda/gemm_f32.h"

namespace ssm::cuda {

void gemm_f32(CudaResources& r, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
              int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
              float* C, int64_t ldc, const char* what) {
  const float alpha = 1.f;
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const int ia = static_cast<int>(lda), ib = static_cast<int>(ldb), ic = static_cast<int>(ldc);
  if (!r.bf16_compute) {
    check(cublasSgemm(r.blas, ta, tb, im, in, ik, &alpha, A, ia, B, ib, &beta, C, ic), what);
    return;
  }
  check(cublasGemmEx(r.blas, ta, tb, im, in, ik, &alpha, A, CUDA_R_32F, ia, B, CUDA_R_32F, ib,
                     &beta, C, CUDA_R_32F, ic, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT),
        what);
}

}  // namespace ssm::cuda

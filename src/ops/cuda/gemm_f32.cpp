#include "ops/cuda/gemm_f32.h"

#include "ops/cuda/launch.h"
#include "ops/cuda/views.h"

namespace ssm::cuda {

const void* bf16_copy(Context& ctx, const float* src, int64_t rows, int64_t cols, int64_t ld) {
  CudaResources& r = resources(ctx);
  if (const void* kept = r.weight_copies.copy_of(src, rows, cols, ld, r.device, r.stream))
    return kept;
  Tensor t = ctx.arena().alloc(DType::kBF16, {cols, rows});
  launch_to_16bit(ConstRows{src, cols, rows, ld}, t.raw(), /*bf16=*/true, /*pieces=*/1, r.stream);
  check_launch("gemm (inputs to bf16)");
  return t.raw();
}

void gemm_f32(Context& ctx, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
              int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
              float* C, int64_t ldc, const char* what) {
  CudaResources& r = resources(ctx);
  const float alpha = 1.f;
  if (!r.bf16_compute) {
    check(cublasSgemm(r.blas, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                      &alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), &beta, C,
                      static_cast<int>(ldc)),
          what);
    return;
  }
  // Explicit bf16 copies rather than CUBLAS_COMPUTE_32F_FAST_16BF on the F32
  // inputs: with that, cuBLAS 13 picked TF32 kernels on an H100 (half the
  // bf16 rate); the copies cost a read and a half-width write of each input.
  const int64_t b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
  Arena::Scope scope(ctx.arena());
  gemm_f32_bf16(ctx, ta, tb, m, n, k, A, lda, bf16_copy(ctx, B, b_rows, b_cols, ldb), b_rows, beta,
                C, ldc, what);
}

void gemm_f32_bf16(Context& ctx, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                   int64_t k, const float* A, int64_t lda, const void* B_bf16, int64_t ldb,
                   float beta, float* C, int64_t ldc, const char* what) {
  CudaResources& r = resources(ctx);
  SSM_CHECK(r.bf16_compute, "gemm_f32_bf16 needs a context with bf16 compute");
  const float alpha = 1.f;
  const int64_t a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
  Arena::Scope scope(ctx.arena());
  const void* Ah = bf16_copy(ctx, A, a_rows, a_cols, lda);
  check(cublasGemmEx(r.blas, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                     &alpha, Ah, CUDA_R_16BF, static_cast<int>(a_rows), B_bf16, CUDA_R_16BF,
                     static_cast<int>(ldb), &beta, C, CUDA_R_32F, static_cast<int>(ldc),
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        what);
}

}  // namespace ssm::cuda

// The F32 products of the cuda backend (cuBLAS, column-major): SGEMM, or,
// when the context computes in bf16 (BackendResources::set_bf16_compute),
// the same product on the bf16 tensor cores: both inputs rounded to bf16
// (nearest even) into the context's arena, products accumulated and written
// in F32, so master weights and activations stay F32 in memory.
#pragma once

#include <cstdint>

#include "ops/cuda/runtime.h"
#include "ssm/ops/context.h"

namespace ssm::cuda {

// A column-major (rows, cols) F32 matrix with leading dimension ld,
// rounded to bf16 into a dense one (leading dimension rows): the kept copy
// of a training weight (weight_copies.h), else a fresh one in the context's
// arena (valid until the caller's Arena::Scope ends). Read as row-major it
// is cols rows of rows values each, ld apart.
const void* bf16_copy(Context& ctx, const float* src, int64_t rows, int64_t cols, int64_t ld);

// C (m, n) = op(A) op(B) + beta C, every matrix F32 column-major.
void gemm_f32(Context& ctx, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
              int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
              float* C, int64_t ldc, const char* what);

// The same product on the bf16 tensor cores (a context with bf16 compute
// only) where B is already bf16 (column-major, leading dimension ldb): an
// input rounded where it was made (the head loss's gradient) is not
// written in F32 and rounded again at each use.
void gemm_f32_bf16(Context& ctx, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                   int64_t k, const float* A, int64_t lda, const void* B_bf16, int64_t ldb,
                   float beta, float* C, int64_t ldc, const char* what);

}  // namespace ssm::cuda

// The cpu backend's small matrix products (blas.h gemm; on CPUs with
// AVX-512 the scans' shapes take x86_small_gemm.cpp) against a sequential
// reference in double: every combination of transposes, row counts that
// leave a partial tile of rows (tiles of 6: 1 to 5 rows left), column
// counts that leave partial vectors, row strides wider than the rows, alpha,
// and beta 0 (C not read: it holds NaN), 1 and another value. Each output
// may differ from the reference only by F32 rounding of its K products: K
// ulps of the sum of their magnitudes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/x86_kernels.h"

namespace ssm {
namespace {

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
};

using GemmFn = void (*)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                        const float*, int64_t, float, float*, int64_t);

void check(GemmFn fn, const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // Stored shapes: A (M, K) or (K, M); B (K, N) or (N, K); 3 extra columns.
  const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  const int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = c.N + 3;
  std::vector<float> A(a_rows * lda), B(b_rows * ldb), C(c.M * ldc);
  for (float& v : A) v = u(rng);
  for (float& v : B) v = u(rng);
  for (float& v : C) v = c.beta == 0.f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  const std::vector<float> C0 = C;
  fn(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc);
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = c.ta ? A[k * lda + m] : A[m * lda + k];
        const double b = c.tb ? B[n * ldb + k] : B[k * ldb + n];
        sum += a * b;
        mag += std::fabs(a * b);
      }
      double want = c.alpha * sum;
      if (c.beta != 0.f) want += c.beta * static_cast<double>(C0[m * ldc + n]);
      const double tol =
          (c.K + 2) * 1.2e-7 * (std::fabs(c.alpha) * mag + std::fabs(c.beta) + 1e-30);
      ASSERT_NEAR(C[m * ldc + n], want, tol)
          << "ta " << c.ta << " tb " << c.tb << " M " << c.M << " N " << c.N << " K " << c.K
          << " at " << m << "," << n;
    }
  // The padding between rows of C is never written.
  if (c.beta == 0.f) return;  // NaN there, which compares unequal to itself
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = c.N; n < ldc; ++n) ASSERT_EQ(C[m * ldc + n], C0[m * ldc + n]);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : {1, 3, 4, 5, 7, 11, 64})
        for (int64_t N : {1, 5, 16, 33, 64, 70, 128})
          for (int64_t K : {1, 9, 40, 64, 128})
            for (float beta : {0.f, 1.f, 0.5f}) out.push_back({ta, tb, M, N, K, 0.75f, beta});
  out.push_back({false, true, 64, 64, 128, 1.f, 0.f});     // scores C B^T
  out.push_back({true, false, 64, 128, 64, 1.f, 0.9f});    // state update X^T B
  out.push_back({false, false, 256, 256, 256, 1.f, 1.f});  // the largest it takes
  out.push_back({false, true, 256, 256, 128, 1.f, 0.f});   // MIMO R=4 scores: the largest B^T
  out.push_back({false, true, 100, 300, 40, 1.f, 0.f});    // beyond it: OpenBLAS
  return out;
}

TEST(SmallGemm, GemmMatchesSequentialReference) {
  uint32_t seed = 1;
  for (const Case& c : cases()) check(&cpu::gemm, c, seed++);
}

TEST(SmallGemm, Avx512KernelMatchesSequentialReference) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  uint32_t seed = 1000;
  for (const Case& c : cases())
    if (cpu::small_gemm_fits(c.tb, c.M, c.N, c.K)) check(&cpu::small_gemm_avx512, c, seed++);
}

// gemm_causal_scores: the entries of the row blocks up to causal_columns
// equal A B^T; the rest of C (NaN) is not written. Rows that leave a partial
// block, 1 and 4 rows per step, and a shape past the AVX-512 kernel's
// (OpenBLAS's gemm per block).
TEST(SmallGemm, CausalScoresWriteTheBlocksGemmCausalReads) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const auto& [M, K, unit] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 8, 1},
                                                          {5, 3, 1},
                                                          {17, 40, 1},
                                                          {64, 128, 1},
                                                          {64, 128, 4},
                                                          {100, 16, 4},
                                                          {256, 128, 4},
                                                          {300, 20, 1}}) {
    SCOPED_TRACE(::testing::Message() << "M " << M << " K " << K << " unit " << unit);
    const int64_t lda = K + 3, ldb = K + 1, ldc = M + 2;
    std::vector<float> A(M * lda), B(M * ldb);
    for (float& v : A) v = u(rng);
    for (float& v : B) v = u(rng);
    std::vector<float> C(M * ldc, std::numeric_limits<float>::quiet_NaN());
    cpu::gemm_causal_scores(M, K, unit, A.data(), lda, B.data(), ldb, C.data(), ldc);
    for (int64_t m = 0; m < M; ++m) {
      const int64_t cols = cpu::causal_columns(m, M, unit);
      for (int64_t n = 0; n < ldc; ++n) {
        if (n >= cols) {
          ASSERT_TRUE(std::isnan(C[m * ldc + n])) << "written past the block at " << m << "," << n;
          continue;
        }
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          sum += static_cast<double>(A[m * lda + k]) * B[n * ldb + k];
          mag += std::fabs(static_cast<double>(A[m * lda + k]) * B[n * ldb + k]);
        }
        ASSERT_NEAR(C[m * ldc + n], sum, (K + 2) * 1.2e-7 * (mag + 1e-30))
            << "at " << m << "," << n;
      }
    }
  }
}

// gemm_lower_add (C += A B) and gemm_lower_transposed_add (C += A^T B) for
// A lower-triangular, zero past the diagonal: every output is within F32
// rounding of a sequential double sum and, on the AVX-512 kernel (one sum
// over k in order), equals the full product's (gemm over all of A, the
// skipped terms exact zeros) bit for bit. Sizes that leave a partial block
// of rows, the backward's 256-step chunk, and one past the AVX-512 kernel's
// shapes (OpenBLAS per block, which may split k elsewhere).
TEST(SmallGemm, LowerTriangularProductsEqualTheFullProducts) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const auto& [M, N] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 5}, {7, 16}, {17, 33}, {64, 64}, {100, 70}, {256, 128}, {300, 20}})
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " transposed " << transposed);
      const int64_t lda = M + 3, ldb = N + 1, ldc = N + 2;
      std::vector<float> A(M * lda, 0.f), B(M * ldb), C(M * ldc);
      for (int64_t r = 0; r < M; ++r)
        for (int64_t c = 0; c <= r; ++c) A[r * lda + c] = u(rng);
      for (float& v : B) v = u(rng);
      for (float& v : C) v = u(rng);
      const std::vector<float> C0 = C;
      std::vector<float> full = C;
      if (transposed) {
        cpu::gemm_lower_transposed_add(M, N, A.data(), lda, B.data(), ldb, C.data(), ldc);
        cpu::gemm(true, false, M, N, M, 1.f, A.data(), lda, B.data(), ldb, 1.f, full.data(), ldc);
      } else {
        cpu::gemm_lower_add(M, N, A.data(), lda, B.data(), ldb, C.data(), ldc);
        cpu::gemm(false, false, M, N, M, 1.f, A.data(), lda, B.data(), ldb, 1.f, full.data(), ldc);
      }
      const bool exact = cpu::cpu_has_avx512() && cpu::small_gemm_fits(false, M, N, M);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double sum = 0, mag = 0;
          for (int64_t k = 0; k < M; ++k) {
            const double a = transposed ? A[k * lda + m] : A[m * lda + k];
            sum += a * B[k * ldb + n];
            mag += std::fabs(a * B[k * ldb + n]);
          }
          if (exact) {
            ASSERT_EQ(C[m * ldc + n], full[m * ldc + n]) << "at " << m << "," << n;
          }
          ASSERT_NEAR(C[m * ldc + n], C0[m * ldc + n] + sum, (M + 3) * 1.2e-7 * (mag + 1));
        }
    }
}

}  // namespace
}  // namespace ssm

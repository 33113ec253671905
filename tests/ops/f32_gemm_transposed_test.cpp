// The AVX-512 F32 product written transposed (F32GemmJob::transposed_y, the
// dx of linear_backward): to the bit the sums of the plain layout, each
// placed at y[j][m]; and dx = dy W from W's packed columns and dy's rows as
// stored equal to the bit the product of dy packed and W transposed (the
// previous dx). Partial tiles of both operands (rows past a multiple of 6,
// activation rows past a multiple of 64 and of 16), a weight row stride
// wider than K, bias, and accumulation; sums against double as well.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/cpu/transposed_products.h"
#include "ops/cpu/x86_kernels.h"
#include "support/random.h"

namespace ssm {
namespace {

struct Dims {
  int64_t M, n, K;
};
const Dims kDims[] = {{64, 6, 16}, {70, 13, 37}, {5, 1, 3}, {130, 20, 64}, {16, 12, 200}};

TEST(F32GemmTransposed, EqualsThePlainLayoutTransposed) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512";
  for (const Dims d : kDims)
    for (bool accumulate : {false, true})
      for (bool bias : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "M " << d.M << " n " << d.n << " K " << d.K
                                          << " accumulate " << accumulate << " bias " << bias);
        const int64_t ldw = d.K + 3, ldy = d.n + 2, ldyt = d.M + 5;
        const std::vector<float> x = ssm::testing::random_vector(d.M * d.K, 1),
                                 W = ssm::testing::random_vector(d.n * ldw, 2);
        const std::vector<float> b = ssm::testing::random_vector(d.n, 3),
                                 y0 = ssm::testing::random_vector(d.M * ldy, 4);
        std::vector<float> packed(cpu::f32_pack_bytes(d.M, d.K) / 4);
        const cpu::F32PackedRows xp =
            cpu::pack_f32_rows(x.data(), d.K, d.M, d.K, packed.data(), 0, (d.M + 15) / 16);
        // The plain layout, and its transpose as the starting values.
        std::vector<float> y = y0, yt(d.n * ldyt, -7.f);
        for (int64_t m = 0; m < d.M; ++m)
          for (int64_t j = 0; j < d.n; ++j) yt[j * ldyt + m] = y0[m * ldy + j];
        const std::vector<float> yt0 = yt;
        const cpu::F32GemmJob job{.W = W.data(),
                                  .n = d.n,
                                  .bias = bias ? b.data() : nullptr,
                                  .accumulate = accumulate,
                                  .y = y.data(),
                                  .ldy = ldy,
                                  .ldw = ldw};
        cpu::f32_gemm_avx512(xp, job);
        cpu::F32GemmJob tjob = job;
        tjob.y = yt.data();
        tjob.ldy = ldyt;
        tjob.transposed_y = true;
        cpu::f32_gemm_avx512(xp, tjob);
        for (int64_t j = 0; j < d.n; ++j) {
          for (int64_t m = 0; m < d.M; ++m) {
            ASSERT_EQ(yt[j * ldyt + m], y[m * ldy + j]) << "at " << j << "," << m;
            double sum = bias ? b[j] : 0.0, mag = std::fabs(sum);
            for (int64_t k = 0; k < d.K; ++k) {
              sum += static_cast<double>(W[j * ldw + k]) * x[m * d.K + k];
              mag += std::fabs(static_cast<double>(W[j * ldw + k]) * x[m * d.K + k]);
            }
            if (accumulate) sum += yt0[j * ldyt + m];
            ASSERT_NEAR(yt[j * ldyt + m], sum, (d.K + 3) * 1.2e-7 * (mag + 1));
          }
          // The row's padding is never written.
          for (int64_t m = d.M; m < ldyt; ++m) ASSERT_EQ(yt[j * ldyt + m], -7.f);
        }
      }
}

TEST(F32GemmTransposed, DxFromPackedColumnsEqualsDyPackedTimesTransposedW) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512";
  ThreadPool pool(2);
  for (const Dims d : kDims)
    for (bool accumulate : {false, true}) {
      // dy (M rows of N, row stride N + 1), W (N rows of K): dx (M rows of K).
      const int64_t M = d.M, N = d.K, K = d.n, lddy = N + 1, lddx = K + 4;
      SCOPED_TRACE(::testing::Message() << "M " << M << " N " << N << " K " << K);
      const std::vector<float> dy = ssm::testing::random_vector(M * lddy, 5),
                               W = ssm::testing::random_vector(N * K, 6);
      const std::vector<float> dx0 = ssm::testing::random_vector(M * lddx, 7);
      std::vector<float> wt(K * N), packed_dy(cpu::f32_pack_bytes(M, N) / 4);
      cpu::transpose_f32(pool, W.data(), K, N, K, wt.data());
      std::vector<float> want = dx0, got = dx0;
      cpu::packed_product(
          pool, cpu::pack_f32_rows_parallel(pool, dy.data(), lddy, M, N, packed_dy.data()),
          wt.data(), K, accumulate, want.data(), lddx);
      std::vector<float> packed_w(cpu::f32_pack_bytes(K, N) / 4);
      cpu::packed_product_transposed(
          pool, cpu::pack_f32_columns_parallel(pool, W.data(), K, N, K, packed_w.data()), dy.data(),
          lddy, M, accumulate, got.data(), lddx);
      EXPECT_EQ(got, want);
    }
}

// packed_product and packed_product_transposed hand their blocks of 96
// weight rows to whichever thread is free (parallel_for_dynamic): on 1, 2
// and 3 threads they equal to the bit one call of the kernel over all rows
// (many blocks and a partial one: N 500 = 5 x 96 + 20).
TEST(PackedProduct, EqualsOneKernelCallOnAnyThreadCount) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512";
  const int64_t M = 70, N = 500, K = 37, ldy = N + 3, ldyt = M + 5;
  const std::vector<float> x = ssm::testing::random_vector(M * K, 11),
                           W = ssm::testing::random_vector(N * K, 12);
  const std::vector<float> y0 = ssm::testing::random_vector(M * ldy, 13),
                           yt0 = ssm::testing::random_vector(N * ldyt, 14);
  std::vector<float> packed(cpu::f32_pack_bytes(M, K) / 4);
  const cpu::F32PackedRows xp =
      cpu::pack_f32_rows(x.data(), K, M, K, packed.data(), 0, (M + 15) / 16);
  for (bool accumulate : {false, true}) {
    std::vector<float> want = y0, want_t = yt0;
    cpu::f32_gemm_avx512(
        xp, {.W = W.data(), .n = N, .accumulate = accumulate, .y = want.data(), .ldy = ldy});
    cpu::f32_gemm_avx512(xp, {.W = W.data(),
                              .n = N,
                              .accumulate = accumulate,
                              .y = want_t.data(),
                              .ldy = ldyt,
                              .transposed_y = true});
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message() << "threads " << threads << " accumulate " << accumulate);
      ThreadPool pool(threads);
      std::vector<float> got = y0, got_t = yt0;
      cpu::packed_product(pool, xp, W.data(), N, accumulate, got.data(), ldy);
      cpu::packed_product_transposed(pool, xp, W.data(), K, N, accumulate, got_t.data(), ldyt);
      EXPECT_EQ(got, want);
      EXPECT_EQ(got_t, want_t);
    }
  }
}

// pack_f32_columns' layout from its definition: block b holds columns
// [16 b, 16 b + 16) of every row, zeros past the last column; any split of
// the blocks between calls (the pool's tasks) writes the same bytes.
TEST(PackF32Columns, HoldsEachBlockOfColumnsRowByRow) {
  for (const int64_t cols : {1, 15, 16, 17, 130, 200, 256})
    for (const int64_t rows : {1, 3, 7}) {
      SCOPED_TRACE(::testing::Message() << "cols " << cols << " rows " << rows);
      const int64_t lda = cols + 5, blocks = (cols + 15) / 16;
      const std::vector<float> a = ssm::testing::random_vector(rows * lda, 5);
      for (const int64_t split : {int64_t{0}, blocks / 2, blocks - 1}) {
        std::vector<float> packed(cpu::f32_pack_bytes(cols, rows) / 4, -7.f);
        cpu::pack_f32_columns(a.data(), lda, rows, cols, packed.data(), 0, split);
        cpu::pack_f32_columns(a.data(), lda, rows, cols, packed.data(), split, blocks);
        for (int64_t b = 0; b < blocks; ++b)
          for (int64_t k = 0; k < rows; ++k)
            for (int64_t l = 0; l < 16; ++l) {
              const int64_t c = 16 * b + l;
              ASSERT_EQ(packed[(b * rows + k) * 16 + l], c < cols ? a[k * lda + c] : 0.f)
                  << "block " << b << " row " << k << " lane " << l << " split " << split;
            }
      }
    }
}

}  // namespace
}  // namespace ssm

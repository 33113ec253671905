// The no-BLAS gemm and gemv (src/ops/cpu/portable_blas.cpp: the WebAssembly
// build's, compiled here for the host's baseline Highway target) against a
// plain triple loop in double: edge shapes (1x1, odd sizes, a remainder of
// every tile and vector width, K = 0), all four transposes, row strides
// wider than the rows (the gaps hold NaN, which must neither leak into the
// results nor be written), and alpha/beta (beta 0 never reads C, which may
// hold NaN). Also the claim the kernel's comment makes: a row of C does
// not depend on how many rows are computed with it (the register blocking).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/blas.h"

namespace ssm::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// rows x cols stored with row stride ld >= cols; the gap holds NaN.
struct Strided {
  int64_t rows, cols, ld;
  std::vector<float> data;
  Strided(int64_t r, int64_t c, int64_t pad, std::mt19937& rng) : rows(r), cols(c), ld(c + pad) {
    data.assign(static_cast<size_t>(std::max<int64_t>(rows * ld, 1)), kNaN);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) at(i, j) = u(rng);
  }
  float& at(int64_t i, int64_t j) { return data[static_cast<size_t>(i * ld + j)]; }
  float at(int64_t i, int64_t j) const { return data[static_cast<size_t>(i * ld + j)]; }
};

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
};

std::string name(const Case& c) {
  return std::string(c.ta ? "T" : "N") + (c.tb ? "T" : "N") + " M=" + std::to_string(c.M) +
         " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta);
}

void check_gemm(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(name(c));
  // op(A) is (M, K): A is stored (K, M) when transposed; op(B) (K, N).
  const Strided A = c.ta ? Strided(c.K, c.M, 3, rng) : Strided(c.M, c.K, 3, rng);
  const Strided B = c.tb ? Strided(c.N, c.K, 5, rng) : Strided(c.K, c.N, 5, rng);
  Strided C(c.M, c.N, 2, rng);
  // beta 0: C is not read, so NaN there must not reach the result.
  if (c.beta == 0.f)
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) C.at(i, j) = kNaN;
  const Strided C0 = C;
  auto a = [&](int64_t i, int64_t k) { return c.ta ? A.at(k, i) : A.at(i, k); };
  auto b = [&](int64_t k, int64_t j) { return c.tb ? B.at(j, k) : B.at(k, j); };

  gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data.data(), A.ld, B.data.data(), B.ld, c.beta,
       C.data.data(), C.ld);

  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        ref += static_cast<double>(a(i, k)) * b(k, j);
        mag += std::abs(static_cast<double>(a(i, k)) * b(k, j));
      }
      ref *= c.alpha;
      mag *= std::abs(c.alpha);
      if (c.beta != 0.f) {
        ref += static_cast<double>(c.beta) * C0.at(i, j);
        mag += std::abs(static_cast<double>(c.beta) * C0.at(i, j));
      }
      // float32 sums of K products: a few ulps of the magnitude per term.
      const double tol = 4e-7 * (static_cast<double>(c.K) + 2) * mag + 1e-30;
      ASSERT_TRUE(std::isfinite(C.at(i, j))) << "C(" << i << ", " << j << ")";
      ASSERT_NEAR(C.at(i, j), ref, tol) << "C(" << i << ", " << j << ")";
    }
    // The gap after each row of C is never written.
    for (int64_t j = c.N; j < C.ld && i + 1 < c.M; ++j)
      ASSERT_TRUE(std::isnan(C.at(i, j))) << "gap C(" << i << ", " << j << ") written";
  }
}

TEST(PortableBlas, GemmMatchesTripleLoopAtEdgeShapes) {
  std::mt19937 rng(1234);
  // Sizes around the tile edges of 4-lane (WebAssembly SIMD128), 8-lane
  // (AVX2) and 16-lane vectors: 2 rows per tile, 4 vectors per tile.
  const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 33, 65};
  const float scales[][2] = {{1.f, 0.f}, {0.5f, 1.f}, {-2.f, 0.25f}};
  int run = 0;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const int64_t M : sizes)
        for (const int64_t N : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{17}, int64_t{64},
                                int64_t{67}, int64_t{129}}) {
          const int64_t K = sizes[(M * 7 + N + run) % std::size(sizes)];
          const auto& s = scales[run++ % std::size(scales)];
          check_gemm({ta, tb, M, N, K, s[0], s[1]}, rng);
        }
}

TEST(PortableBlas, GemmWithNothingToSum) {
  // K = 0: C = beta C (and 0 with beta 0, whatever C held).
  std::mt19937 rng(7);
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      check_gemm({ta, tb, 5, 9, 0, 1.f, 0.f}, rng);
      check_gemm({ta, tb, 9, 3, 0, 1.f, 0.5f}, rng);
    }
  // M or N = 0 touches nothing.
  float c = 3.f;
  const float x = 1.f;
  gemm(false, false, 0, 1, 1, 1.f, &x, 1, &x, 1, 0.f, &c, 1);
  gemm(false, true, 1, 0, 1, 1.f, &x, 1, &x, 1, 0.f, &c, 1);
  EXPECT_EQ(c, 3.f);
}

TEST(PortableBlas, RowsDoNotDependOnTheBlocking) {
  // The non-transposed-B product computed for M rows at once and row by
  // row: bit for bit the same (each element sums its products in
  // ascending k, in tiles of 2 rows or of 1).
  std::mt19937 rng(99);
  for (const bool ta : {false, true})
    for (const int64_t N : {int64_t{5}, int64_t{64}, int64_t{70}}) {
      const int64_t M = 11, K = 37;
      const Strided A = ta ? Strided(K, M, 1, rng) : Strided(M, K, 1, rng);
      const Strided B(K, N, 0, rng);
      std::vector<float> all(static_cast<size_t>(M * N)), row(static_cast<size_t>(N));
      gemm(ta, false, M, N, K, 1.f, A.data.data(), A.ld, B.data.data(), B.ld, 0.f, all.data(), N);
      for (int64_t i = 0; i < M; ++i) {
        const float* a =
            ta ? &A.data[static_cast<size_t>(i)] : &A.data[static_cast<size_t>(i * A.ld)];
        gemm(ta, false, 1, N, K, 1.f, a, A.ld, B.data.data(), B.ld, 0.f, row.data(), N);
        for (int64_t j = 0; j < N; ++j)
          ASSERT_EQ(row[static_cast<size_t>(j)], all[static_cast<size_t>(i * N + j)])
              << (ta ? "T" : "N") << " N=" << N << " row " << i << " column " << j;
      }
    }
}

TEST(PortableBlas, GemvMatchesTripleLoop) {
  std::mt19937 rng(5);
  for (const int64_t N : {1, 3, 4, 5, 8, 13, 64})
    for (const int64_t K : {1, 3, 4, 7, 16, 65, 256})
      for (const float beta : {0.f, 1.f}) {
        SCOPED_TRACE("N=" + std::to_string(N) + " K=" + std::to_string(K) +
                     " beta=" + std::to_string(beta));
        const Strided W(N, K, 3, rng);
        const Strided x(1, K, 0, rng);
        Strided y(1, N, 0, rng);
        if (beta == 0.f) std::fill(y.data.begin(), y.data.end(), kNaN);
        const Strided y0 = y;
        gemv(N, K, 0.75f, W.data.data(), W.ld, x.data.data(), beta, y.data.data());
        for (int64_t i = 0; i < N; ++i) {
          double ref = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            ref += static_cast<double>(W.at(i, k)) * x.at(0, k);
            mag += std::abs(static_cast<double>(W.at(i, k)) * x.at(0, k));
          }
          ref = 0.75 * ref + (beta != 0.f ? static_cast<double>(beta) * y0.at(0, i) : 0.0);
          mag = 0.75 * mag + (beta != 0.f ? std::abs(static_cast<double>(y0.at(0, i))) : 0.0);
          ASSERT_TRUE(std::isfinite(y.at(0, i))) << "y[" << i << "]";
          ASSERT_NEAR(y.at(0, i), ref, 4e-7 * (static_cast<double>(K) + 2) * mag + 1e-30)
              << "y[" << i << "]";
        }
      }
}

}  // namespace
}  // namespace ssm::cpu

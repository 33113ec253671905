// The scans' BF16 products (x86_bf16_pairs.cpp): the two packers hold each
// word to the F32 -> BF16 rounding of the scaled value to nearest even, bit
// for bit, with zeros past the last row or column; the product to a double
// sum over the words' BF16 values (2 roundings per pair at most: (2 pairs +
// 2) ulps of the sum of the magnitudes), for partial tiles of rows (and the
// 8-row tiles of narrow products), partial vectors of columns, both layouts
// of A, rows scaled after the sum or not, and beta 0 (C full of NaN, not
// read), 1 and another value; the chunk's causal scores and product to
// double sums of their rounded inputs. Skipped on CPUs without AVX-512 BF16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/x86_kernels.h"
#include "ssm/tensor/convert.h"
#include "support/random.h"

namespace ssm {
namespace {

// F32 -> BF16 to nearest, ties to even (finite values; the library's bulk
// conversion, Highway's DemoteTo, truncates instead).
uint16_t bf16_of(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
float value_of(uint16_t h) {
  float v;
  bf16_to_f32(&h, &v, 1);
  return v;
}
uint32_t word_of(float lo, float hi) {
  return static_cast<uint32_t>(bf16_of(lo)) | static_cast<uint32_t>(bf16_of(hi)) << 16;
}

class Bf16PairsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX-512 BF16";
  }
};

TEST_F(Bf16PairsTest, RowWordsRoundEachScaledPair) {
  for (int64_t cols : {1, 2, 15, 31, 32, 33, 64, 128, 131})
    for (bool scaled : {false, true}) {
      const int64_t rows = 5, lda = cols + 3, words = (cols + 1) / 2, ldo = words + 2;
      const std::vector<float> a =
          ssm::testing::random_vector(rows * lda, static_cast<uint32_t>(cols), -2.f, 2.f);
      const std::vector<float> s = ssm::testing::random_vector(rows, 7, -2.f, 2.f);
      std::vector<uint32_t> out(rows * ldo, 0xDEADBEEF);
      cpu::bf16_row_words(a.data(), lda, scaled ? s.data() : nullptr, rows, cols, out.data(), ldo);
      for (int64_t r = 0; r < rows; ++r) {
        const float f = scaled ? s[r] : 1.f;
        for (int64_t j = 0; j < words; ++j) {
          const float lo = f * a[r * lda + 2 * j];
          const float hi = 2 * j + 1 < cols ? f * a[r * lda + 2 * j + 1] : 0.f;
          ASSERT_EQ(out[r * ldo + j], word_of(lo, hi)) << cols << " " << r << "," << j;
        }
        // Nothing written past the row's words.
        for (int64_t j = words; j < ldo; ++j) ASSERT_EQ(out[r * ldo + j], 0xDEADBEEFu);
      }
    }
}

TEST_F(Bf16PairsTest, RowPairsRoundEachScaledColumnPair) {
  for (int64_t rows : {1, 2, 7, 64})
    for (int64_t cols : {1, 16, 17, 64, 130})
      for (bool scaled : {false, true}) {
        const int64_t lda = cols + 5, pairs = (rows + 1) / 2, ldo = cols + 1;
        std::vector<float> a = ssm::testing::random_vector(
            rows * lda, static_cast<uint32_t>(rows * 131 + cols), -2.f, 2.f);
        // An infinity in the last row must not leak into the zero past it.
        a[(rows - 1) * lda] = std::numeric_limits<float>::infinity();
        const std::vector<float> s = ssm::testing::random_vector(rows, 11, -2.f, 2.f);
        std::vector<uint32_t> out(pairs * ldo, 0xDEADBEEF);
        cpu::bf16_row_pairs(a.data(), lda, scaled ? s.data() : nullptr, rows, cols, out.data(),
                            ldo);
        for (int64_t j = 0; j < pairs; ++j) {
          const int64_t r0 = 2 * j, r1 = 2 * j + 1;
          for (int64_t c = 0; c < cols; ++c) {
            const float lo = (scaled ? s[r0] : 1.f) * a[r0 * lda + c];
            const float hi = r1 < rows ? (scaled ? s[r1] : 1.f) * a[r1 * lda + c] : 0.f;
            ASSERT_EQ(out[j * ldo + c], word_of(lo, hi))
                << rows << "x" << cols << " " << j << "," << c;
          }
          ASSERT_EQ(out[j * ldo + cols], 0xDEADBEEFu);
        }
      }
}

TEST_F(Bf16PairsTest, ProductMatchesDoubleSumOfTheWords) {
  int checked = 0;
  for (int64_t M : {1, 3, 4, 5, 13, 64, 128})
    for (int64_t N : {1, 15, 16, 17, 64, 70, 130})
      for (int64_t pairs : {1, 7, 64})
        for (bool a_columns : {false, true})
          for (float beta : {0.f, 1.f, 0.625f}) {
            // Rows scaled after the sum in one case of three.
            ++checked;
            // A(m, j) at m * a_row + j * a_col: rows of words, or columns
            // (the layout of a row-pair packing read down its columns).
            const int64_t a_row = a_columns ? 1 : pairs + 2, a_col = a_columns ? M + 2 : 1;
            const int64_t ldb = N + 3, ldc = N + 1;
            const int64_t a_words = (M + 2) * (pairs + 2);
            const std::vector<float> av = ssm::testing::random_vector(2 * a_words, 1, -2.f, 2.f);
            const std::vector<float> bv =
                ssm::testing::random_vector(2 * pairs * ldb, 2, -2.f, 2.f);
            std::vector<uint32_t> A(a_words), B(pairs * ldb);
            for (size_t i = 0; i < A.size(); ++i) A[i] = word_of(av[2 * i], av[2 * i + 1]);
            for (size_t i = 0; i < B.size(); ++i) B[i] = word_of(bv[2 * i], bv[2 * i + 1]);
            std::vector<float> C = ssm::testing::random_vector(M * ldc, 3, -2.f, 2.f);
            if (beta == 0.f) std::fill(C.begin(), C.end(), std::numeric_limits<float>::quiet_NaN());
            const std::vector<float> C0 = C;
            const std::vector<float> row_scale = ssm::testing::random_vector(M, 4, -2.f, 2.f);
            const bool scaled = checked % 3 == 0;
            cpu::bf16_pair_product(M, N, pairs, A.data(), a_row, a_col, B.data(), ldb,
                                   scaled ? row_scale.data() : nullptr, beta, C.data(), ldc);
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                double sum = 0, mag = 0;
                for (int64_t j = 0; j < pairs; ++j) {
                  const uint32_t a = A[m * a_row + j * a_col], b = B[j * ldb + n];
                  for (int half = 0; half < 2; ++half) {
                    const double p =
                        static_cast<double>(value_of(static_cast<uint16_t>(a >> (16 * half)))) *
                        value_of(static_cast<uint16_t>(b >> (16 * half)));
                    sum += p;
                    mag += std::fabs(p);
                  }
                }
                const double s = scaled ? row_scale[m] : 1.0;
                sum *= s;
                if (beta != 0.f) sum += beta * static_cast<double>(C0[m * ldc + n]);
                const double tol =
                    (2 * pairs + 3) * 1.2e-7 * (std::fabs(s) * mag + std::fabs(beta) * 2 + 1e-30);
                ASSERT_NEAR(C[m * ldc + n], sum, tol)
                    << M << "x" << N << "x" << pairs << " at " << m << "," << n;
              }
            // Columns past N untouched.
            for (int64_t m = 0; m < M; ++m)
              ASSERT_TRUE(std::memcmp(&C[m * ldc + N], &C0[m * ldc + N], sizeof(float)) == 0);
          }
  EXPECT_EQ(checked, 7 * 7 * 3 * 2 * 3);
}

// The chunk's causal products: every entry the causal product reads is the
// double sum over the BF16 values of its inputs (within the F32 sum's
// rounding), entries past a row block's columns are neither written
// (scores) nor read (product: NaN there), for SSD's unit 1 and MIMO's 4,
// partial row blocks and odd counts.
TEST_F(Bf16PairsTest, CausalScoresAndProductMatchDoubleSumsOfRoundedInputs) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto rounded = [](float v) { return static_cast<double>(value_of(bf16_of(v))); };
  for (const auto& [M, K, unit] : {std::tuple<int64_t, int64_t, int64_t>{64, 128, 4},
                                   {64, 64, 1},
                                   {23, 13, 1},
                                   {36, 7, 4},
                                   {5, 33, 1}}) {
    SCOPED_TRACE(::testing::Message() << "M " << M << " K " << K << " unit " << unit);
    const int64_t Kw = (K + 1) / 2, Mw = (M + 1) / 2, lda = K + 3, ldc = M + 2;
    const std::vector<float> A = ssm::testing::random_vector(M * lda, 11, -2.f, 2.f);
    const std::vector<float> B = ssm::testing::random_vector(M * lda, 12, -2.f, 2.f);
    std::vector<uint32_t> aw(M * Kw), work(2 * M * Kw);
    cpu::bf16_row_words(A.data(), lda, nullptr, M, K, aw.data(), Kw);
    std::vector<float> C(M * ldc, nan);
    cpu::bf16_causal_scores(M, K, unit, aw.data(), Kw, B.data(), lda, C.data(), ldc, work.data());
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < M; ++c) {
        if (c >= cpu::causal_columns(r, M, unit)) {
          ASSERT_TRUE(std::isnan(C[r * ldc + c])) << r << "," << c << " written";
          continue;
        }
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = rounded(A[r * lda + k]) * rounded(B[c * lda + k]);
          sum += p;
          mag += std::fabs(p);
        }
        ASSERT_NEAR(C[r * ldc + c], sum, (K + 2) * 1.2e-7 * mag + 1e-30) << r << "," << c;
      }

    // The product with N = K columns of B's rows as pairs; A is C with
    // random values where it was written and NaN where it was not.
    const int64_t N = K, ldy = N + 1;
    std::vector<float> S = C;
    const std::vector<float> fill = ssm::testing::random_vector(M * ldc, 13, -2.f, 2.f);
    for (size_t i = 0; i < S.size(); ++i)
      if (!std::isnan(S[i])) S[i] = fill[i];
    std::vector<uint32_t> bp(Mw * N), words(M * Mw, 0xDEADBEEF);
    cpu::bf16_row_pairs(B.data(), lda, nullptr, M, N, bp.data(), N);
    std::vector<float> Y(M * ldy, nan);
    cpu::bf16_causal_product(M, N, unit, S.data(), ldc, bp.data(), N, Y.data(), ldy, words.data());
    for (int64_t r = 0; r < M; ++r) {
      for (int64_t n = 0; n < N; ++n) {
        double sum = 0, mag = 0;
        for (int64_t s = 0; s < cpu::causal_columns(r, M, unit); ++s) {
          const double p = rounded(S[r * ldc + s]) * rounded(B[s * lda + n]);
          sum += p;
          mag += std::fabs(p);
        }
        ASSERT_NEAR(Y[r * ldy + n], sum, (M + 2) * 1.2e-7 * mag + 1e-30) << r << "," << n;
      }
      ASSERT_TRUE(std::isnan(Y[r * ldy + N])) << "column past N written";
    }
  }
}

}  // namespace
}  // namespace ssm

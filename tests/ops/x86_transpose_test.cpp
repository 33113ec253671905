// The AVX-512 transpose of x86_transpose.cpp (the packing of the training
// products and the small products' operands) against the plain loop, to the
// bit: whole 16 x 16 blocks, edges of rows and columns, one row or column,
// strides wider than the rows on both sides.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ops/cpu/x86_kernels.h"

namespace ssm {
namespace {

TEST(X86Transpose, EqualsThePlainLoop) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512";
  struct Dims {
    int64_t rows, cols;
  };
  for (const Dims d : {Dims{16, 16}, {48, 32}, {37, 21}, {1, 40}, {40, 1}, {15, 17}, {100, 768}})
    for (int64_t pad : {0, 5}) {
      SCOPED_TRACE(::testing::Message() << d.rows << " x " << d.cols << " pad " << pad);
      const int64_t lda = d.cols + pad, ldo = d.rows + pad;
      std::mt19937 rng(static_cast<uint32_t>(d.rows * 1000 + d.cols + pad));
      std::uniform_real_distribution<float> u(-1.f, 1.f);
      std::vector<float> a(d.rows * lda);
      for (float& v : a) v = u(rng);
      // Sentinels in the output's padding must stay.
      std::vector<float> got(d.cols * ldo, -7.f), want(d.cols * ldo, -7.f);
      for (int64_t r = 0; r < d.rows; ++r)
        for (int64_t c = 0; c < d.cols; ++c) want[c * ldo + r] = a[r * lda + c];
      cpu::transpose_f32_avx512(a.data(), lda, d.rows, d.cols, got.data(), ldo);
      EXPECT_EQ(got, want);
    }
}

}  // namespace
}  // namespace ssm

// The vectorised passes of the prefill added for the scans, the convolution
// and Mamba-3's prepare and output: conv_taps_row (conv_taps.h) against the
// scalar loop it must equal to the bit, and scale_rows, scaled_tanh,
// inv_rms_vec (vec_math.h) and mamba3_step_scalars (mamba3_step_scalars.h)
// against sums and maps in double, over lengths that end on and off the
// vector width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/conv_taps.h"
#include "ops/cpu/mamba3_step_scalars.h"
#include "ops/cpu/silu_rows.h"
#include "ops/cpu/vec_math.h"
#include "support/random.h"

namespace ssm {
namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

class PrefillKernels : public ::testing::TestWithParam<int64_t> {};

// Each channel: the bias (or nothing), then each tap's rounded product added
// in ascending tap order, as conv1d's decode step sums it.
TEST_P(PrefillKernels, ConvTapsRowEqualsTheScalarSums) {
  const int64_t C = GetParam();
  for (int64_t K : {1, 2, 4, 8})
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "K " << K << " bias " << with_bias);
      const std::vector<float> taps = testing::random_vector(K * C, 1, -1.f, 1.f);
      const std::vector<float> bias = testing::random_vector(C, 2, -1.f, 1.f);
      // The rows at a stride, as the projection's column block lies.
      const int64_t ld = C + 5;
      const std::vector<float> in = testing::random_vector(K * ld, 3, -3.f, 3.f);
      std::vector<const float*> rows(K);
      for (int64_t k = 0; k < K; ++k) rows[k] = in.data() + (K - 1 - k) * ld;  // any order
      std::vector<float> out(C);
      cpu::conv_taps_row(rows.data(), taps.data(), C, with_bias ? bias.data() : nullptr, K, C, false,
                         out.data());
      for (int64_t c = 0; c < C; ++c) {
        volatile float acc = with_bias ? bias[c] : 0.f;  // volatile: no fused multiply-add
        for (int64_t k = 0; k < K; ++k) {
          volatile float product = taps[k * C + c] * rows[k][c];
          acc = acc + product;
        }
        EXPECT_TRUE(same_bits(out[c], acc)) << c << ": " << out[c] << " vs " << acc;
      }
      // With the SiLU in the kernel: silu_in_place's values over those sums.
      std::vector<float> gated(C);
      cpu::conv_taps_row(rows.data(), taps.data(), C, with_bias ? bias.data() : nullptr, K, C, true,
                         gated.data());
      cpu::silu_in_place(out.data(), C);
      for (int64_t c = 0; c < C; ++c)
        EXPECT_TRUE(same_bits(gated[c], out[c])) << c << ": " << gated[c] << " vs " << out[c];
    }
}

TEST_P(PrefillKernels, ScaleRowsMultipliesEachRowByItsScale) {
  const int64_t n = GetParam(), rows = 3, ldx = n + 3, ldo = n + 1;
  const std::vector<float> x = testing::random_vector(rows * ldx, 4, -2.f, 2.f);
  const std::vector<float> scale = testing::random_vector(rows, 5, 0.f, 1.f);
  std::vector<float> out(rows * ldo, -7.f);
  cpu::scale_rows(x.data(), ldx, scale.data(), rows, n, out.data(), ldo);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[r * ldo + i], x[r * ldx + i] * scale[r]);
    if (r + 1 < rows) {
      EXPECT_EQ(out[r * ldo + n], -7.f) << "past the row";
    }
  }
  // In place (out = x).
  std::vector<float> y = x;
  cpu::scale_rows(y.data(), ldx, scale.data(), rows, n, y.data(), ldx);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[r * ldx + i], x[r * ldx + i] * scale[r]);
}

// Each row decay_products' values to the bit (D added on the diagonal after),
// zeros past the diagonal as far as gemm_causal reads, nothing past that
// written; chunks of q = the parameter (at most 100 here), with and without D.
TEST_P(PrefillKernels, CausalDecayMatrixEqualsRowsOfDecayProducts) {
  const int64_t q = std::min<int64_t>(GetParam(), 100), ld_sc = q + 3, ldm = q + 2;
  std::vector<float> cs = testing::random_vector(q, 11, -0.5f, 0.f);
  for (int64_t t = 1; t < q; ++t) cs[t] += cs[t - 1];  // a falling cumulative sum
  if (q > 3) cs[3] = -200.f;  // past the flush to zero for the columns after it
  const std::vector<float> sc = testing::random_vector(q * ld_sc, 12, -2.f, 2.f);
  const std::vector<float> dt = testing::random_vector(q, 13, 0.f, 1.f);
  const float D = 0.75f;
  for (const float* diag : {static_cast<const float*>(nullptr), &D}) {
    SCOPED_TRACE(diag ? "D" : "no D");
    std::vector<float> M(q * ldm, -7.f);
    cpu::causal_decay_matrix(cs.data(), sc.data(), ld_sc, dt.data(), diag, q, M.data(), ldm);
    std::vector<float> want(q);
    for (int64_t t = 0; t < q; ++t) {
      cpu::decay_products(cs[t], cs.data(), sc.data() + t * ld_sc, dt.data(), want.data(), t + 1);
      if (diag) want[t] += D;
      const int64_t width = cpu::causal_columns(t, q, 1);
      for (int64_t s = 0; s < ldm; ++s) {
        const float got = M[t * ldm + s];
        if (s <= t) {
          EXPECT_TRUE(same_bits(got, want[s])) << t << "," << s << ": " << got << " vs " << want[s];
        } else {
          EXPECT_TRUE(same_bits(got, s < width ? 0.f : -7.f)) << t << "," << s << ": " << got;
        }
      }
    }
  }
}

TEST_P(PrefillKernels, ScaledTanhMatchesDouble) {
  const int64_t n = GetParam();
  std::vector<float> x = testing::random_vector(n, 6, -12.f, 12.f);
  x[0] = 0.f;
  std::vector<float> out(n);
  const float pi = 3.14159265f;
  cpu::scaled_tanh(x.data(), pi, out.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double want = pi * std::tanh(static_cast<double>(x[i]));
    EXPECT_NEAR(out[i], want, 1e-6 * (1e-3 + std::abs(want))) << x[i];
  }
}

TEST_P(PrefillKernels, InvRmsMatchesDouble) {
  const int64_t n = GetParam();
  const std::vector<float> x = testing::random_vector(n, 7, -4.f, 4.f);
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  const double want = 1 / std::sqrt(s / static_cast<double>(n) + 1e-5);
  EXPECT_NEAR(cpu::inv_rms_vec(x.data(), n, 1e-5f), want, 1e-12 * want);
}

// softplus, the heavy tail's -A and the sigmoid, each against its double
// definition, across the branches (softplus's +-20, the tail's 0, the
// sigmoid's sign) and far out.
TEST_P(PrefillKernels, Mamba3StepScalarsMatchDouble) {
  const int64_t n = GetParam();
  std::vector<float> ddt = testing::random_vector(n, 8, -30.f, 30.f);
  std::vector<float> ddA = testing::random_vector(n, 9, -50.f, 50.f);
  std::vector<float> trap = testing::random_vector(n, 10, -40.f, 40.f);
  const float special[] = {0.f, -0.f, 20.f, -20.f, 19.99f, -19.99f, 100.f, -100.f, 1e-3f};
  for (int64_t i = 0; i < n && i < 9; ++i) ddt[i] = ddA[i] = trap[i] = special[i];
  const float dt_bias = 0.5f, A_floor = 1e-4f;
  std::vector<float> dt = ddt, A = ddA, lam = trap;
  cpu::mamba3_step_scalars(dt.data(), A.data(), lam.data(), n, dt_bias, A_floor);
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(ddt[i] + dt_bias);  // the sum rounded as in the kernel
    const double sp = x > 20 ? x : std::log1p(std::exp(x));
    // Far below zero the results are subnormal floats, good to their spacing.
    const double tiny = std::numeric_limits<float>::denorm_min();
    EXPECT_NEAR(dt[i], sp, 4e-7 * sp + tiny) << "softplus " << x;
    const double v = ddA[i], tail = v >= 0 ? 1 + v : 1 / (1 - v);
    EXPECT_NEAR(A[i], std::min(-tail, -static_cast<double>(A_floor)), 4e-7 * tail) << "A " << v;
    const double t = trap[i], sg = 1 / (1 + std::exp(-t));
    EXPECT_NEAR(lam[i], sg, 4e-7 * sg + tiny) << "sigmoid " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Lengths, PrefillKernels, ::testing::Values(1, 7, 16, 33, 100, 1792));

}  // namespace
}  // namespace ssm

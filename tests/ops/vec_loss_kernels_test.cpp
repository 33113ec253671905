// The vectorised passes of the head's softmax (max_of, exp_shifted_sum in
// ops/cpu/vec_math.h) and of the gated norm's backward (silu_gate_backward
// in ops/cpu/vec_backward.h) against scalar loops in double, over lengths
// that end on and off the vector width.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/cpu/vec_backward.h"
#include "ops/cpu/vec_math.h"
#include "support/random.h"

namespace ssm {
namespace {

class VecLossKernels : public ::testing::TestWithParam<int64_t> {};

TEST_P(VecLossKernels, MaxOfIsTheLargest) {
  const int64_t n = GetParam();
  std::vector<float> x = testing::random_vector(n, 1, -50.f, -1.f);  // all negative: padding must not win
  for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
    std::vector<float> y = x;
    y[at] = -0.5f;
    EXPECT_EQ(cpu::max_of(y.data(), n), -0.5f) << at;
  }
}

TEST_P(VecLossKernels, ExpShiftedSumMatchesDouble) {
  const int64_t n = GetParam();
  const std::vector<float> x = testing::random_vector(n, 2, -30.f, 5.f);
  std::vector<float> y = x;
  const float shift = 5.f;
  const double sum = cpu::exp_shifted_sum(y.data(), n, shift);
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    // x - shift rounded to float as in the kernel: only the exponential's
    // error is measured.
    const double e = std::exp(static_cast<double>(x[i] - shift));
    want += e;
    EXPECT_NEAR(y[i], e, 4e-7 * e) << i;
  }
  EXPECT_NEAR(sum, want, 4e-7 * want);
}

TEST_P(VecLossKernels, SiluGateBackwardMatchesDouble) {
  const int64_t n = GetParam();
  const std::vector<float> y = testing::random_vector(n, 3, -3.f, 3.f);
  const std::vector<float> z = testing::random_vector(n, 4, -20.f, 20.f);
  const std::vector<float> g = testing::random_vector(n, 5, -1.f, 1.f);
  std::vector<float> dy(n), dz(n);
  cpu::silu_gate_backward(y.data(), z.data(), g.data(), dy.data(), dz.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double s = 1 / (1 + std::exp(-static_cast<double>(z[i])));
    const double want_dy = g[i] * z[i] * s, want_dz = g[i] * y[i] * s * (1 + z[i] * (1 - s));
    EXPECT_NEAR(dy[i], want_dy, 1e-6 * (1 + std::abs(want_dy))) << i;
    EXPECT_NEAR(dz[i], want_dz, 1e-6 * (1 + std::abs(want_dz))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Lengths, VecLossKernels, ::testing::Values(1, 7, 16, 33, 50280));

}  // namespace
}  // namespace ssm

// The SSD backward's vectorised row loops (ops/cpu/ssd_backward_rows.h)
// against the formulas written out here in double, over lengths that end
// on and off every vector width; the elements past n must be left alone.
#include "ops/cpu/ssd_backward_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace ssm {
namespace {

constexpr int64_t kPad = 3;  // floats past n that must keep their values

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<float> v(n + kPad);
  for (float& x : v) x = unit(rng);
  return v;
}

// |got - want| within a float rounding or two of the result's size.
void expect_float_close(float got, double want, int64_t i) {
  EXPECT_NEAR(got, want, 2.5e-7 * std::max(1.0, std::abs(want))) << "at " << i;
}

class SsdBackwardRows : public ::testing::TestWithParam<int64_t> {};

TEST_P(SsdBackwardRows, SkipRowScalesAndSumsInDouble) {
  const int64_t n = GetParam();
  const std::vector<float> dy = random_floats(n, 1), x = random_floats(n, 2);
  std::vector<float> dx = random_floats(n, 3);
  const std::vector<float> before = dx;
  const float Dh = 0.73f;
  const double sum = cpu::ssd_skip_row(dy.data(), x.data(), Dh, n, dx.data());
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    want += static_cast<double>(dy[i]) * x[i];   // each product exact in double
    EXPECT_EQ(dx[i], Dh * dy[i]) << "at " << i;  // one rounding: the same bits
  }
  EXPECT_NEAR(sum, want, 1e-13 * std::max<int64_t>(1, n));
  for (int64_t i = n; i < n + kPad; ++i) EXPECT_EQ(dx[i], before[i]);
}

TEST_P(SsdBackwardRows, CarriedRowAddsAndScales) {
  const int64_t n = GetParam();
  const std::vector<float> g = random_floats(n, 4), c = random_floats(n, 5);
  std::vector<float> dc = random_floats(n, 6), cs = random_floats(n, 7);
  const std::vector<float> dc0 = dc, cs0 = cs;
  const float e = 0.41f;
  cpu::ssd_carried_row(e, g.data(), c.data(), n, dc.data(), cs.data());
  for (int64_t i = 0; i < n; ++i) {
    expect_float_close(dc[i], static_cast<double>(dc0[i]) + static_cast<double>(e) * g[i], i);
    EXPECT_EQ(cs[i], e * c[i]) << "at " << i;
  }
  for (int64_t i = n; i < n + kPad; ++i) {
    EXPECT_EQ(dc[i], dc0[i]);
    EXPECT_EQ(cs[i], cs0[i]);
  }
}

TEST_P(SsdBackwardRows, AddWeightedRowAddsTheRoundedProducts) {
  const int64_t n = GetParam();
  const std::vector<float> g = random_floats(n, 8);
  std::vector<float> out = random_floats(n, 9);
  const std::vector<float> out0 = out;
  const double w = 1.2345678901234;
  cpu::ssd_add_weighted_row(w, g.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) {
    // float(w g) is one rounding of a double product; then one float addition.
    const float add = static_cast<float>(w * g[i]);
    EXPECT_EQ(out[i], out0[i] + add) << "at " << i;
    expect_float_close(out[i], static_cast<double>(out0[i]) + w * g[i], i);
  }
  for (int64_t i = n; i < n + kPad; ++i) EXPECT_EQ(out[i], out0[i]);
}

INSTANTIATE_TEST_SUITE_P(Lengths, SsdBackwardRows,
                         ::testing::Values(0, 1, 2, 5, 8, 16, 17, 31, 64, 100, 128));

}  // namespace
}  // namespace ssm

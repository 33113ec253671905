// The vectorised rotary turns of the cpu Mamba-3 prepare (rotary.h) against
// a sequential reference in double: both pair layouts, angle counts that
// leave a partial vector (1, 3, 17, 33), none or fewer than N / 2 (entries
// past the pairs only biased), several strided rows of q and k, phases past
// the range of the vector Sin and Cos (their scalar fallback), and a value
// that does not depend on where it sits in its run.
#include "ops/cpu/rotary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

namespace ssm {
namespace {

// A few F32 ulps of values of order one: the turn's two products and sum,
// on top of cosines and sines within a few ulps.
constexpr double kTol = 4e-6;

std::vector<float> random_values(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

TEST(SinCos, MatchesDoubleForEveryLengthAndRange) {
  for (const int64_t n : {1, 5, 16, 17, 40}) {
    for (const float scale : {3.f, 300.f, 1e5f}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " scale " << scale);
      const std::vector<float> x = random_values(n, scale, 7 + static_cast<uint32_t>(n));
      std::vector<float> c(x.size()), s(x.size());
      cpu::sin_cos(x.data(), c.data(), s.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(c[i], std::cos(static_cast<double>(x[i])), kTol) << "x " << x[i];
        EXPECT_NEAR(s[i], std::sin(static_cast<double>(x[i])), kTol) << "x " << x[i];
      }
      // One value alone gives what it gave in its run.
      for (int64_t i = 0; i < n; ++i) {
        float c1, s1;
        cpu::sin_cos(&x[i], &c1, &s1, 1);
        EXPECT_EQ(c1, c[i]);
        EXPECT_EQ(s1, s[i]);
      }
    }
  }
}

// x rows at a stride wider than N (the groups between a rank's rows), a
// bias per row; q and k from different values.
void check_turn(bool adjacent, int64_t rows, int64_t N, int64_t S, float scale) {
  SCOPED_TRACE(::testing::Message() << (adjacent ? "adjacent" : "halves") << " rows " << rows
                                    << " N " << N << " S " << S << " phase scale " << scale);
  const int64_t ldx = N + 5;
  const std::vector<float> xq = random_values(rows * ldx, 1.f, 3),
                           xk = random_values(rows * ldx, 1.f, 4);
  const std::vector<float> bq = random_values(rows * N, 1.f, 5),
                           bk = random_values(rows * N, 1.f, 6);
  const std::vector<float> phase = random_values(S, scale, 7);
  std::vector<float> q(rows * N, -7.f), k(rows * N, -7.f);
  cpu::biased_turn({xq.data(), ldx, bq.data(), q.data()}, {xk.data(), ldx, bk.data(), k.data()},
                   rows, N, phase.data(), S, adjacent);
  for (const auto& [got, x, bias] : {std::tuple{&q, &xq, &bq}, std::tuple{&k, &xk, &bk}}) {
    std::vector<double> want(static_cast<size_t>(rows * N));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t n = 0; n < N; ++n)
        want[r * N + n] = static_cast<double>((*x)[r * ldx + n]) + (*bias)[r * N + n];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < S; ++j) {
        const int64_t e0 = r * N + (adjacent ? 2 * j : j);
        const int64_t e1 = r * N + (adjacent ? 2 * j + 1 : j + N / 2);
        const double c = std::cos(static_cast<double>(phase[j]));
        const double s = std::sin(static_cast<double>(phase[j]));
        const double a = want[e0], b = want[e1];
        want[e0] = a * c - b * s;
        want[e1] = a * s + b * c;
      }
    for (int64_t i = 0; i < rows * N; ++i) EXPECT_NEAR((*got)[i], want[i], kTol) << "entry " << i;
  }
}

TEST(BiasedTurn, MatchesDoubleForBothLayouts) {
  for (const bool adjacent : {false, true}) {
    check_turn(adjacent, 1, 2, 1, 3.f);
    check_turn(adjacent, 2, 8, 0, 3.f);    // no angles: only the bias
    check_turn(adjacent, 2, 8, 3, 3.f);    // fewer angles than N / 2
    check_turn(adjacent, 3, 34, 17, 3.f);  // a partial vector of angles
    check_turn(adjacent, 4, 128, 32, 50.f);
    check_turn(adjacent, 1, 130, 64, 50.f);  // partial vectors of plain entries
    check_turn(adjacent, 2, 70, 33, 1e5f);   // past the vector range
  }
}

}  // namespace
}  // namespace ssm

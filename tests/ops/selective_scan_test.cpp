// selective_scan (Mamba-1's S6) on every backend against ref, in the layouts
// the Mamba-1 layer passes (column blocks of x_proj's and in_proj's rows),
// with and without the optional inputs and a carried state; splitting a
// sequence carries the state; and every backend, ref included, against the
// quadratic form of the same map computed here in double. Also the
// weightless RMS norm FalconMamba applies to dt, B and C.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/against_ref.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/selective_scan.h"

namespace ssm {
namespace {

using testing::host;
using testing::in_block;
using testing::on;
using testing::on_rows;
using testing::random_tensor;

constexpr testing::Tolerance kScanTol{1e-5, 1e-6};

struct Problem {
  int64_t B, L, D, N;
  Tensor x, dt_raw, dt_bias, A_log, Bm, Cm, Dskip, z, state;
};

Problem random_problem(int64_t B, int64_t L, int64_t D, int64_t N, uint64_t seed, bool optional,
                       bool with_state) {
  Problem p{B, L, D, N};
  p.x = random_tensor({B, L, D}, seed);
  p.dt_raw = random_tensor({B, L, D}, seed + 1, -3.f, 1.f);
  p.A_log = random_tensor({D, N}, seed + 2, -1.f, 2.f);
  p.Bm = random_tensor({B, L, N}, seed + 3);
  p.Cm = random_tensor({B, L, N}, seed + 4);
  if (optional) {
    p.dt_bias = random_tensor({D}, seed + 5, -1.f, 0.5f);
    p.Dskip = random_tensor({D}, seed + 6);
    p.z = random_tensor({B, L, D}, seed + 7, -3.f, 3.f);
  }
  if (with_state) p.state = random_tensor({B, D, N}, seed + 8);
  return p;
}

// The op's arguments on ctx's device; `wide` puts every row input in a
// column block of wider rows, as the layer passes them.
ops::SelectiveScanArgs args_on(Context& ctx, const Problem& p, bool wide, Tensor* y_rows) {
  const auto y = in_block(ctx, Tensor::zeros(DType::kF32, {p.B, p.L, p.D}), wide, 2, 1);
  if (y_rows) *y_rows = y.rows;
  return {.x = on_rows(ctx, p.x, wide, 1, 3), .dt_raw = on_rows(ctx, p.dt_raw, wide, 0, 2),
          .dt_bias = on(ctx, p.dt_bias), .A_log = on(ctx, p.A_log),
          .B = on_rows(ctx, p.Bm, wide, 4, 20), .C = on_rows(ctx, p.Cm, wide, 20, 4),
          .D = on(ctx, p.Dskip), .z = p.z.defined() ? on_rows(ctx, p.z, wide, 5, 0) : Tensor(),
          .y = y.view, .state = p.state.defined() ? on(ctx, p.state.clone()) : Tensor()};
}

class SelectiveScanTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SelectiveScanTest, MatchesRef) {
  int config = 0;
  for (int64_t L : {1, 2, 17, 64})
    for (int64_t D : {1, 16, 37})
      for (int64_t N : {1, 16})
        for (int64_t B : {1, 3}) {
          ++config;
          const bool optional = config % 2 == 0, with_state = config % 3 != 0, wide = config % 4 < 2;
          SCOPED_TRACE(::testing::Message() << "L " << L << " D " << D << " N " << N << " B " << B
                                            << " optional " << optional << " state " << with_state
                                            << " wide " << wide);
          const Problem p = random_problem(B, L, D, N, 100 + config, optional, with_state);
          testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
            Tensor y_rows;
            const ops::SelectiveScanArgs a = args_on(ctx, p, wide, &y_rows);
            ops::selective_scan(ctx, a);
            return testing::outputs({{"y", y_rows}, {"state", a.state}});
          }, {.tol = kScanTol});
        }
}

// [0, 9), one step, then [10, 40), each from the state the last left, equal
// one scan over [0, 40).
// Step sizes on both far sides of softplus's branches (below -20, above 20),
// decays far below exp's range, gates saturated either way, and a state
// size and width no vector divides: the cpu kernel's lanes against ref.
TEST_P(SelectiveScanTest, ExtremeStepsAndGatesMatchRef) {
  for (const int64_t N : {7, 64}) {
    Problem p = random_problem(2, 9, 40, N, 900 + N, true, true);
    p.dt_raw = random_tensor({2, 9, 40}, 901, -40.f, 40.f);
    p.A_log = random_tensor({40, N}, 902, -1.f, 4.f);
    p.z = random_tensor({2, 9, 40}, 903, -60.f, 60.f);
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
      Tensor y_rows;
      const ops::SelectiveScanArgs a = args_on(ctx, p, N == 7, &y_rows);
      ops::selective_scan(ctx, a);
      return testing::outputs({{"y", y_rows}, {"state", a.state}});
    }, {.tol = kScanTol});
  }
}

TEST_P(SelectiveScanTest, SplittingASequenceCarriesTheState) {
  Problem whole = random_problem(2, 40, 24, 16, 7, true, false);
  whole.state = Tensor::zeros(DType::kF32, {2, 24, 16});
  Context ctx(GetParam(), 2);
  const ops::SelectiveScanArgs one = args_on(ctx, whole, false, nullptr);
  ops::selective_scan(ctx, one);
  const Tensor y_whole = host(one.y);
  Tensor state = on(ctx, Tensor::zeros(DType::kF32, {2, 24, 16}));
  for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 9}, {9, 10}, {10, 40}}) {
    auto part_of = [&](const Tensor& t) { return t.slice(1, t0, t1).clone(); };
    Problem part = whole;
    part.L = t1 - t0;
    part.x = part_of(whole.x), part.dt_raw = part_of(whole.dt_raw), part.Bm = part_of(whole.Bm);
    part.Cm = part_of(whole.Cm), part.z = part_of(whole.z);
    ops::SelectiveScanArgs a = args_on(ctx, part, false, nullptr);
    a.state = state;
    ops::selective_scan(ctx, a);
    EXPECT_TRUE(testing::close(host(a.y), y_whole.slice(1, t0, t1), kScanTol)) << t0 << ".." << t1;
  }
  EXPECT_TRUE(testing::close(host(state), host(one.state), kScanTol));
}

// y_t = SiLU(z_t) (sum_{s<=t} exp(A sum_{s<r<=t} dt_r) dt_s x_s B_s . C_t + D x_t):
// the same map without a recurrence, for a fresh sequence.
TEST_P(SelectiveScanTest, MatchesTheQuadraticForm) {
  const Problem p = random_problem(2, 23, 5, 4, 55, true, false);
  Context ctx(GetParam(), 1);
  const ops::SelectiveScanArgs a = args_on(ctx, p, false, nullptr);
  ops::selective_scan(ctx, a);
  const Tensor y = host(a.y);
  auto at = [](const Tensor& t, int64_t i) { return static_cast<double>(t.data<float>()[i]); };
  auto softplus = [](double v) { return std::log1p(std::exp(v)); };
  double worst = 0, scale = 0;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t d = 0; d < p.D; ++d)
      for (int64_t t = 0; t < p.L; ++t) {
        double want = 0;
        for (int64_t n = 0; n < p.N; ++n) {
          const double A = -std::exp(at(p.A_log, d * p.N + n));
          for (int64_t s = 0; s <= t; ++s) {
            double decay = 0;
            for (int64_t r = s + 1; r <= t; ++r)
              decay += softplus(at(p.dt_raw, (b * p.L + r) * p.D + d) + at(p.dt_bias, d));
            const double dts = softplus(at(p.dt_raw, (b * p.L + s) * p.D + d) + at(p.dt_bias, d));
            want += std::exp(A * decay) * dts * at(p.x, (b * p.L + s) * p.D + d) *
                    at(p.Bm, (b * p.L + s) * p.N + n) * at(p.Cm, (b * p.L + t) * p.N + n);
          }
        }
        const int64_t i = (b * p.L + t) * p.D + d;
        want += at(p.Dskip, d) * at(p.x, i);
        const double zv = at(p.z, i);
        want *= zv / (1 + std::exp(-zv));
        worst = std::max(worst, std::abs(at(y, i) - want));
        scale = std::max(scale, std::abs(want));
      }
  EXPECT_LE(worst, 1e-5 * scale) << "worst " << worst << " of " << scale;
}

TEST_P(SelectiveScanTest, RejectsMismatchedShapes) {
  Context ctx(GetParam(), 1);
  const Problem p = random_problem(1, 4, 8, 4, 3, false, false);
  ops::SelectiveScanArgs a = args_on(ctx, p, false, nullptr);
  a.A_log = on(ctx, random_tensor({8, 5}, 1));  // N 5 against B's 4
  EXPECT_THROW(ops::selective_scan(ctx, a), Error);
  a = args_on(ctx, p, false, nullptr);
  a.state = on(ctx, Tensor::zeros(DType::kF32, {1, 8, 3}));
  EXPECT_THROW(ops::selective_scan(ctx, a), Error);
}

// Without weights the norm is x / rms(x): ref and every backend agree, and
// both equal the weighted norm with weights of one.
TEST_P(SelectiveScanTest, WeightlessRmsNormIsTheNormWithUnitWeights) {
  const Tensor x = random_tensor({9, 20}, 31);
  testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
    const auto xd = in_block(ctx, x, true, 4, 16);  // in place inside wider rows, as the layer does
    ops::rms_norm(ctx, {.x = xd.view, .eps = 1e-6f, .out = xd.view});
    return testing::outputs({{"out", xd.rows}});
  });
  Context ctx(GetParam(), 1);
  const Tensor plain = on(ctx, Tensor::zeros(DType::kF32, {9, 20}));
  const Tensor unit = on(ctx, Tensor::zeros(DType::kF32, {9, 20}));
  Tensor ones = Tensor::empty(DType::kF32, {20});
  std::fill(ones.data<float>(), ones.data<float>() + 20, 1.f);
  ops::rms_norm(ctx, {.x = on(ctx, x), .eps = 1e-6f, .out = plain});
  ops::rms_norm(ctx, {.x = on(ctx, x), .w = on(ctx, ones), .eps = 1e-6f, .out = unit});
  EXPECT_TRUE(testing::bitwise_equal(host(plain), host(unit)));
  // And it does normalise: every row's mean square is 1 (up to eps).
  const Tensor h = host(plain);
  for (int64_t r = 0; r < 9; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < 20; ++i) ss += std::pow(h.data<float>()[r * 20 + i], 2);
    EXPECT_NEAR(ss / 20, 1.0, 1e-4) << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SelectiveScanTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm

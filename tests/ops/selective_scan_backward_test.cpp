// selective_scan_backward (Mamba-1's S6) on every backend against ref, with
// and without the optional inputs (dt bias, D, the gate z), a starting state
// and the layer's layouts (column blocks of wider rows); and ref's backward
// in double against centred differences of its own forward in double.
#include <gtest/gtest.h>

#include "ops/against_ref.h"
#include "ops/finite_differences.h"
#include "ops/ref/selective_scan.h"
#include "ssm/ops/selective_scan.h"

namespace ssm {
namespace {

using testing::in_block;
using testing::on;
using testing::on_rows;
using testing::random_tensor;

struct Problem {
  int64_t B, L, D, N;
  Tensor x, dt_raw, dt_bias, A_log, Bm, Cm, Dskip, z, state, dy;
};

Problem random_problem(int64_t B, int64_t L, int64_t D, int64_t N, uint64_t seed, bool optional,
                       bool with_state) {
  Problem p{B, L, D, N};
  p.x = random_tensor({B, L, D}, seed);
  p.dt_raw = random_tensor({B, L, D}, seed + 1, -3.f, 1.f);
  p.A_log = random_tensor({D, N}, seed + 2, -1.f, 1.5f);
  p.Bm = random_tensor({B, L, N}, seed + 3);
  p.Cm = random_tensor({B, L, N}, seed + 4);
  if (optional) {
    p.dt_bias = random_tensor({D}, seed + 5, -1.f, 0.5f);
    p.Dskip = random_tensor({D}, seed + 6);
    p.z = random_tensor({B, L, D}, seed + 7, -3.f, 3.f);
  }
  if (with_state) p.state = random_tensor({B, D, N}, seed + 8);
  p.dy = random_tensor({B, L, D}, seed + 9);
  return p;
}

class SelectiveScanBackwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SelectiveScanBackwardTest, MatchesRef) {
  int config = 0;
  for (int64_t L : {1, 2, 17, 64})
    for (int64_t D : {1, 16, 37})
      for (int64_t N : {1, 16})
        for (int64_t B : {1, 3}) {
          ++config;
          const bool optional = config % 2 == 0, with_state = config % 3 == 0,
                     wide = config % 4 < 2;
          SCOPED_TRACE(::testing::Message()
                       << "L " << L << " D " << D << " N " << N << " B " << B << " optional "
                       << optional << " state " << with_state << " wide " << wide);
          const Problem p = random_problem(B, L, D, N, 300 + config, optional, with_state);
          testing::expect_matches_ref(
              GetParam(),
              [&](Context& ctx) -> testing::Outputs {
                auto out = [&](int64_t cols, int64_t left, int64_t right) {
                  return in_block(ctx, Tensor::zeros(DType::kF32, {B, L, cols}), wide, left, right);
                };
                // dt_raw | dB | dC as the layer's one gradient row of x_proj's output.
                const auto dx = out(D, 1, 2), ddt = out(D, 0, 3), dB = out(N, 2, 1),
                           dC = out(N, 3, 0);
                const auto dz = out(D, 2, 2);
                const Tensor ddt_bias = on(ctx, random_tensor({D}, 1)),
                             dA_log = on(ctx, random_tensor({D, N}, 2));
                const Tensor dD = on(ctx, random_tensor({D}, 3));
                const ops::SelectiveScanBackwardArgs a{
                    .fwd = {.x = on_rows(ctx, p.x, wide, 1, 3),
                            .dt_raw = on_rows(ctx, p.dt_raw, wide, 0, 2),
                            .dt_bias = on(ctx, p.dt_bias),
                            .A_log = on(ctx, p.A_log),
                            .B = on_rows(ctx, p.Bm, wide, 4, 20),
                            .C = on_rows(ctx, p.Cm, wide, 20, 4),
                            .D = on(ctx, p.Dskip),
                            .z = p.z.defined() ? on_rows(ctx, p.z, wide, 5, 0) : Tensor(),
                            .state = on(ctx, p.state)},
                    .dy = on_rows(ctx, p.dy, wide, 2, 2),
                    .dx = dx.view,
                    .ddt_raw = ddt.view,
                    .dB = dB.view,
                    .dC = dC.view,
                    .dz = p.z.defined() ? dz.view : Tensor(),
                    .ddt_bias = optional ? ddt_bias : Tensor(),
                    .dA_log = dA_log,
                    .dD = optional ? dD : Tensor()};
                ops::selective_scan_backward(ctx, a);
                return testing::outputs({{"dx", dx.rows},
                                         {"ddt_raw", ddt.rows},
                                         {"dB", dB.rows},
                                         {"dC", dC.rows},
                                         {"dz", dz.rows},
                                         {"ddt_bias", ddt_bias},
                                         {"dA_log", dA_log},
                                         {"dD", dD}});
              },
              {.tol = {2e-5, 2e-6}});
        }
}

TEST_P(SelectiveScanBackwardTest, RejectsAGradientOfZWithoutAGate) {
  Context ctx(GetParam(), 1);
  const Problem p = random_problem(1, 4, 8, 4, 3, false, false);
  const Tensor d = on(ctx, Tensor::zeros(DType::kF32, {1, 4, 8})),
               dn = on(ctx, Tensor::zeros(DType::kF32, {1, 4, 4}));
  const ops::SelectiveScanBackwardArgs a{.fwd = {.x = on(ctx, p.x),
                                                 .dt_raw = on(ctx, p.dt_raw),
                                                 .A_log = on(ctx, p.A_log),
                                                 .B = on(ctx, p.Bm),
                                                 .C = on(ctx, p.Cm)},
                                         .dy = on(ctx, p.dy),
                                         .dx = d,
                                         .ddt_raw = d.clone(),
                                         .dB = dn,
                                         .dC = dn.clone(),
                                         .dz = d.clone()};
  EXPECT_THROW(ops::selective_scan_backward(ctx, a), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, SelectiveScanBackwardTest,
                         ::testing::ValuesIn(testing::all_backends()), testing::backend_param_name);

// ref's backward in double against centred differences of J = sum(w * y)
// over every input, with and without the optional ones and a starting state.
TEST(SelectiveScanBackwardRef, MatchesFiniteDifferences) {
  for (int variant = 0; variant < 4; ++variant) {
    const bool optional = variant & 1, with_state = variant & 2;
    SCOPED_TRACE(::testing::Message() << "optional " << optional << " state " << with_state);
    const Problem p = random_problem(2, 7, 3, 4, 40 + variant, optional, with_state);
    auto f64 = [](const Tensor& t) { return t.defined() ? t.to_dtype(DType::kF64) : t; };
    Tensor x = f64(p.x), dt_raw = f64(p.dt_raw), dt_bias = f64(p.dt_bias), A_log = f64(p.A_log);
    Tensor Bm = f64(p.Bm), Cm = f64(p.Cm), Dskip = f64(p.Dskip), z = f64(p.z);
    const Tensor state = f64(p.state), w = f64(p.dy);
    Context ctx("ref", 1);
    auto args = [&](const Tensor& y, const Tensor& st) {
      return ops::SelectiveScanArgs{.x = x,
                                    .dt_raw = dt_raw,
                                    .dt_bias = dt_bias,
                                    .A_log = A_log,
                                    .B = Bm,
                                    .C = Cm,
                                    .D = Dskip,
                                    .z = z,
                                    .y = y,
                                    .state = st};
    };
    auto J = [&] {
      const Tensor y = testing::zeros_f64({2, 7, 3});
      ref::selective_scan<double>(ctx, args(y, state.defined() ? state.clone() : state));
      return testing::weighted_sum(y, w);
    };
    auto fd = [&](Tensor& t) { return t.defined() ? testing::fd_gradient(t, J) : Tensor(); };
    const Tensor gx = fd(x), gdt = fd(dt_raw), gbias = fd(dt_bias), gA = fd(A_log), gB = fd(Bm);
    const Tensor gC = fd(Cm), gD = fd(Dskip), gz = fd(z);
    auto zeros_like = [](const Tensor& t) {
      return t.defined() ? testing::zeros_f64(t.shape()) : Tensor();
    };
    const ops::SelectiveScanBackwardArgs a{.fwd = args(Tensor(), state),
                                           .dy = w,
                                           .dx = zeros_like(x),
                                           .ddt_raw = zeros_like(x),
                                           .dB = zeros_like(Bm),
                                           .dC = zeros_like(Cm),
                                           .dz = zeros_like(z),
                                           .ddt_bias = zeros_like(dt_bias),
                                           .dA_log = zeros_like(A_log),
                                           .dD = zeros_like(Dskip)};
    ref::selective_scan_backward<double>(ctx, a);
    EXPECT_LE(testing::rel_error_f64(a.dx, gx), testing::kFdTolerance);
    EXPECT_LE(testing::rel_error_f64(a.ddt_raw, gdt), testing::kFdTolerance);
    EXPECT_LE(testing::rel_error_f64(a.dB, gB), testing::kFdTolerance);
    EXPECT_LE(testing::rel_error_f64(a.dC, gC), testing::kFdTolerance);
    EXPECT_LE(testing::rel_error_f64(a.dA_log, gA), testing::kFdTolerance);
    if (optional) {
      EXPECT_LE(testing::rel_error_f64(a.ddt_bias, gbias), testing::kFdTolerance);
      EXPECT_LE(testing::rel_error_f64(a.dD, gD), testing::kFdTolerance);
      EXPECT_LE(testing::rel_error_f64(a.dz, gz), testing::kFdTolerance);
    }
  }
}

}  // namespace
}  // namespace ssm

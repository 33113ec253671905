// ssd_scan_backward on every backend against ref, over chunk sizes, lengths
// that are not multiples of the chunk, groups, batch rows, starting states
// and layouts; ref's backward (through the recurrence) against finite
// differences of its forward in double.
#include <gtest/gtest.h>

#include <tuple>

#include "ops/against_ref.h"
#include "ops/finite_differences.h"
#include "ops/ref/ssd.h"
#include "ops/ssd_problem.h"
#include "ssm/ops/ssd.h"

namespace ssm {
namespace {

using testing::in_block;
using testing::on;
using testing::on_rows;
using testing::SsdLayout;
using testing::SsdProblem;

struct BackwardCase {
  int64_t chunk, L, G, B;
  bool with_state;
  int64_t P = 4, N = 6;
};
// The old engine's configurations, then longer ones, a single step and a
// length that is a multiple of the chunk, then a layer-sized head, then 10
// chunks of 64 (the GPU's chunk pass walks them 8 at a time).
const BackwardCase kCases[] = {
    {4, 11, 1, 1, false},  {4, 11, 2, 2, false},          {5, 10, 1, 2, true},
    {16, 7, 2, 1, true},   {1, 5, 1, 1, false},           {3, 13, 2, 2, true},
    {64, 100, 2, 2, true}, {256, 300, 1, 1, false},       {7, 1, 1, 2, true},
    {16, 64, 4, 1, true},  {64, 150, 1, 1, true, 16, 32}, {64, 600, 1, 1, true}};

class SsdScanBackwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SsdScanBackwardTest, MatchesRef) {
  for (const BackwardCase& c : kCases)
    for (int variant = 0; variant < 4; ++variant) {  // bits: D present, strided layout
      const bool with_D = variant & 1, strided = variant & 2;
      SCOPED_TRACE(::testing::Message()
                   << "chunk " << c.chunk << " L " << c.L << " G " << c.G << " B " << c.B
                   << " state " << c.with_state << " variant " << variant);
      const int64_t H = 2 * c.G, HP = H * c.P, GN = c.G * c.N;
      const uint64_t seed = 100 + c.chunk * 13 + c.L * 7 + c.G + c.B * 3 + c.with_state;
      const SsdProblem p =
          SsdProblem::random(c.B, c.L, H, c.P, c.N, c.G, seed, with_D, c.with_state);
      const Tensor dy = testing::random_tensor({c.B, c.L, HP}, seed + 7);
      const Tensor dA0 = testing::random_tensor({H}, seed + 8),
                   dD0 = testing::random_tensor({H}, seed + 9);
      testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
        // Strided: dx | dB | dC one row (the layer's gradient of the conv
        // output), inside wider rows like ddt; their padding must survive.
        auto zeros = [&](int64_t cols, int64_t pad) {
          return in_block(ctx, Tensor::zeros(DType::kF32, {c.B, c.L, cols}), strided, pad, 1);
        };
        const auto dxbc = zeros(HP + 2 * GN, 2), ddt = zeros(H, 3);
        ops::SsdScanBackwardArgs a{
            .fwd = testing::ssd_args_on(
                ctx, p, strided ? SsdLayout::kLayerRows : SsdLayout::kSharedBC, c.chunk),
            .dy = on_rows(ctx, dy, strided, 0, 3),
            .dx = dxbc.view.cols(0, HP),
            .dB = dxbc.view.cols(HP, HP + GN),
            .dC = dxbc.view.cols(HP + GN, HP + 2 * GN),
            .ddt = ddt.view,
            .dA = on(ctx, dA0),
            .dD = with_D ? on(ctx, dD0) : Tensor()};
        ops::ssd_scan_backward(ctx, a);
        return testing::outputs(
            {{"dx | dB | dC", dxbc.rows}, {"ddt", ddt.rows}, {"dA", a.dA}, {"dD", a.dD}});
      });
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, SsdScanBackwardTest,
                         ::testing::ValuesIn(testing::all_backends()), testing::backend_param_name);

class SsdScanBackwardRef : public ::testing::TestWithParam<BackwardCase> {};

TEST_P(SsdScanBackwardRef, MatchesFiniteDifferencesOfTheRecurrence) {
  const BackwardCase c = GetParam();
  const int64_t H = 2 * c.G, HP = H * c.P, GN = c.G * c.N;
  const uint64_t seed = 100 + c.chunk * 13 + c.L * 7 + c.G + c.B * 3 + c.with_state;
  const SsdProblem p = SsdProblem::random(c.B, c.L, H, c.P, c.N, c.G, seed, true, c.with_state);
  auto f64 = [](const Tensor& t) { return t.defined() ? t.to_dtype(DType::kF64) : t; };
  Tensor x = f64(p.x), Bm = f64(p.Bm), Cm = f64(p.Cm), dt = f64(p.dt), A = f64(p.A), D = f64(p.D);
  const Tensor state = f64(p.state), w = testing::random_f64({c.B, c.L, HP}, seed + 6);
  Context ctx("ref", 1);
  auto args = [&](const Tensor& y, const Tensor& st) {
    return ops::SsdScanArgs{.groups = c.G,
                            .chunk = c.chunk,
                            .x = x,
                            .B = Bm,
                            .C = Cm,
                            .dt = dt,
                            .A = A,
                            .D = D,
                            .y = y,
                            .state = st};
  };
  auto J = [&] {
    const Tensor y = testing::zeros_f64({c.B, c.L, HP});
    ref::ssd_scan<double>(ctx, args(y, state.defined() ? state.clone() : state));
    return testing::weighted_sum(y, w);
  };
  const Tensor gx = testing::fd_gradient(x, J), gB = testing::fd_gradient(Bm, J);
  const Tensor gC = testing::fd_gradient(Cm, J), gdt = testing::fd_gradient(dt, J);
  const Tensor gA = testing::fd_gradient(A, J), gD = testing::fd_gradient(D, J);
  const ops::SsdScanBackwardArgs a{.fwd = args(Tensor(), state),
                                   .dy = w,
                                   .dx = testing::zeros_f64({c.B, c.L, HP}),
                                   .dB = testing::zeros_f64({c.B, c.L, GN}),
                                   .dC = testing::zeros_f64({c.B, c.L, GN}),
                                   .ddt = testing::zeros_f64({c.B, c.L, H}),
                                   .dA = testing::zeros_f64({H}),
                                   .dD = testing::zeros_f64({H})};
  ref::ssd_scan_backward<double>(ctx, a);
  EXPECT_LE(testing::rel_error_f64(a.dx, gx), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(a.dB, gB), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(a.dC, gC), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(a.ddt, gdt), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(a.dA, gA), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(a.dD, gD), testing::kFdTolerance);
}

INSTANTIATE_TEST_SUITE_P(OldConfigurations, SsdScanBackwardRef,
                         ::testing::Values(kCases[0], kCases[1], kCases[2], kCases[3], kCases[4],
                                           kCases[5]),
                         [](const ::testing::TestParamInfo<BackwardCase>& info) {
                           const BackwardCase& c = info.param;
                           return cat("Q", c.chunk, "_L", c.L, "_G", c.G, "_B", c.B,
                                      c.with_state ? "_state" : "_fresh");
                         });

}  // namespace
}  // namespace ssm

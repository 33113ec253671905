// ssd_scan_backward on every backend against ref, over chunk sizes, lengths
// that are not multiples of the chunk, groups, batch rows, starting states
// and layouts; ref's backward (through the recurrence) against finite
// differences of its forward in double.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
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

// A problem's backward inputs on the host: the forward's, dy, and the
// gradients dA and dD accumulate into.
struct BackwardInputs {
  int64_t B, L, H, P, N, G;
  SsdProblem p;
  Tensor dy, dA0, dD0;
  BackwardInputs(int64_t B_, int64_t L_, int64_t H_, int64_t P_, int64_t N_, int64_t G_,
                 uint64_t seed, bool with_D, bool with_state)
      : B(B_),
        L(L_),
        H(H_),
        P(P_),
        N(N_),
        G(G_),
        p(SsdProblem::random(B, L, H, P, N, G, seed, with_D, with_state)),
        dy(testing::random_tensor({B, L, H * P}, seed + 7)),
        dA0(testing::random_tensor({H}, seed + 8)),
        dD0(with_D ? testing::random_tensor({H}, seed + 9) : Tensor()) {}
};

// ssd_scan_backward on ctx. Strided: dx | dB | dC one row (the layer's
// gradient of the conv output), inside wider rows like ddt; their padding
// must survive.
testing::Outputs run_backward(Context& ctx, const BackwardInputs& in, int64_t chunk, bool strided) {
  const int64_t HP = in.H * in.P, GN = in.G * in.N;
  auto zeros = [&](int64_t cols, int64_t pad) {
    return in_block(ctx, Tensor::zeros(DType::kF32, {in.B, in.L, cols}), strided, pad, 1);
  };
  const auto dxbc = zeros(HP + 2 * GN, 2), ddt = zeros(in.H, 3);
  ops::SsdScanBackwardArgs a{
      .fwd = testing::ssd_args_on(ctx, in.p, strided ? SsdLayout::kLayerRows : SsdLayout::kSharedBC,
                                  chunk),
      .dy = on_rows(ctx, in.dy, strided, 0, 3),
      .dx = dxbc.view.cols(0, HP),
      .dB = dxbc.view.cols(HP, HP + GN),
      .dC = dxbc.view.cols(HP + GN, HP + 2 * GN),
      .ddt = ddt.view,
      .dA = on(ctx, in.dA0),
      .dD = on(ctx, in.dD0)};
  ops::ssd_scan_backward(ctx, a);
  return testing::outputs(
      {{"dx | dB | dC", dxbc.rows}, {"ddt", ddt.rows}, {"dA", a.dA}, {"dD", a.dD}});
}

class SsdScanBackwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SsdScanBackwardTest, MatchesRef) {
  for (const BackwardCase& c : kCases)
    for (int variant = 0; variant < 4; ++variant) {  // bits: D present, strided layout
      const bool with_D = variant & 1, strided = variant & 2;
      SCOPED_TRACE(::testing::Message()
                   << "chunk " << c.chunk << " L " << c.L << " G " << c.G << " B " << c.B
                   << " state " << c.with_state << " variant " << variant);
      const uint64_t seed = 100 + c.chunk * 13 + c.L * 7 + c.G + c.B * 3 + c.with_state;
      const BackwardInputs in(c.B, c.L, 2 * c.G, c.P, c.N, c.G, seed, with_D, c.with_state);
      testing::expect_matches_ref(
          GetParam(), [&](Context& ctx) { return run_backward(ctx, in, c.chunk, strided); });
    }
}

// dA sums g = <C, dC^h> - <B, dB^h> over every step, a difference of nearly
// equal sums, so TF32's error in dB^h and dC^h grows by the cancellation
// (6.5e-3 on the 130m-shaped case in the emulator, with the kernels of
// before and after 2026-12-06 alike).
constexpr testing::Tolerance kRoundedTol{2e-3, 1e-5}, kRoundedDaTol{1e-2, 1e-5};

// run on a fresh context of `backend` with rounded products, made (and
// run: the CPU emulator reads it at each call) while SSM_CUDA_SSD_BACKWARD_F16
// is `f16`; its value before is restored.
template <class Run>
testing::Outputs run_rounded(const std::string& backend, const char* f16, const Run& run) {
  const char* was = std::getenv("SSM_CUDA_SSD_BACKWARD_F16");
  const std::optional<std::string> before = was ? std::optional<std::string>(was) : std::nullopt;
  if (f16) ::setenv("SSM_CUDA_SSD_BACKWARD_F16", f16, 1);
  Context ctx(backend, 1);
  EXPECT_TRUE(ctx.resources()->set_bf16_compute(true));
  testing::Outputs got = run(ctx);
  if (before)
    ::setenv("SSM_CUDA_SSD_BACKWARD_F16", before->c_str(), 1);
  else
    ::unsetenv("SSM_CUDA_SSD_BACKWARD_F16");
  return got;
}

// A context that rounds its products (training with --bf16) runs the chunk
// passes on the tensor cores where their tiles fit (cuda:
// ssd_scan_backward_tiles.cu, and chunk_backward with FP16 operands,
// ssd_scan_backward_f16.cu, unless SSM_CUDA_SSD_BACKWARD_F16 is `f16` "0"):
// near ref at the precision of its rounded operands, repeatable bit for
// bit, and not the exact path's bits (so the mode is seen to take effect),
// nor with FP16 the TF32 kernel's (so the variant is). Cases: 130m-shaped
// heads (P 64, N 128, one group shared by every head, a short last chunk, a
// carried state), several groups of an odd number of heads with batch rows
// and P, N off the tile sizes and the 16-byte pieces (P N odd: chunk_pass a
// float a thread), and one head. Host backends have no such mode.
void expect_rounded_near_ref(const std::string& backend, const char* f16) {
  const bool fp16 = std::string_view(f16) == "1";
  {
    Context probe(backend, 1);
    if (!(probe.resources() && probe.resources()->set_bf16_compute(true)))
      GTEST_SKIP() << backend << " has no rounded products";
  }
  struct Shape {
    int64_t B, L, H, P, N, G;
    bool with_D, with_state, strided;
  };
  for (const Shape& s : {Shape{1, 150, 5, 64, 128, 1, true, true, true},
                         Shape{2, 70, 6, 7, 13, 2, false, false, false},
                         Shape{1, 64, 1, 8, 16, 1, true, false, true}}) {
    SCOPED_TRACE(::testing::Message() << "B " << s.B << " L " << s.L << " H " << s.H << " P " << s.P
                                      << " N " << s.N << " G " << s.G);
    const BackwardInputs in(s.B, s.L, s.H, s.P, s.N, s.G, 300 + s.L + s.H, s.with_D, s.with_state);
    Context ref("ref", 1), exact(backend, 1);
    auto run = [&](Context& ctx) { return run_backward(ctx, in, 64, s.strided); };
    const testing::Outputs want = run(ref), precise = run(exact),
                           got = run_rounded(backend, f16, run),
                           repeat = run_rounded(backend, f16, run);
    for (size_t i = 0; i < want.size(); ++i) {
      const testing::Tolerance tol = want[i].first == "dA" ? kRoundedDaTol : kRoundedTol;
      EXPECT_TRUE(testing::close(got[i].second, want[i].second, tol)) << want[i].first;
      EXPECT_TRUE(testing::bitwise_equal(got[i].second, repeat[i].second)) << want[i].first;
      if (std::getenv("SSM_PRINT_ERRORS"))
        std::cout << "[error] rounded" << (fp16 ? " f16 " : " ") << want[i].first << " "
                  << testing::max_rel_error(got[i].second, want[i].second) << "\n";
    }
    EXPECT_FALSE(testing::bitwise_equal(got[0].second, precise[0].second));
    if (fp16) {
      const testing::Outputs tf32 = run_rounded(backend, "0", run);
      EXPECT_FALSE(testing::bitwise_equal(got[0].second, tf32[0].second));
    }
  }
}

TEST_P(SsdScanBackwardTest, RoundedProductsStayNearRef) {
  expect_rounded_near_ref(GetParam(), "0");
}

TEST_P(SsdScanBackwardTest, Fp16OperandsStayNearRef) { expect_rounded_near_ref(GetParam(), "1"); }

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

// ssd_scan on every backend against ref (the recurrence in double): the old
// engine's chunked-vs-sequential configurations (chunk sizes, lengths that
// are not multiples of the chunk, groups, batch rows, fresh and carried
// states), the layouts layers pass, decoding step by step, split sequences
// carrying the state; and every backend, ref included, against the
// quadratic (attention-like) form of the same map in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <vector>

#include "ops/against_ref.h"
#include "ops/cpu/x86_kernels.h"
#include "ops/ssd_problem.h"
#include "ssm/ops/ssd.h"

namespace ssm {
namespace {

using testing::host;
using testing::on;
using testing::SsdLayout;
using testing::SsdProblem;

// The chunked form sums the same terms as the recurrence in another order,
// in float; the worst seen over these configurations is about 4e-6.
constexpr testing::Tolerance kScanTol{1e-5, 1e-6};

class SsdScanTest : public ::testing::TestWithParam<std::string> {};

// `run` on a fresh context of `backend` with the environment variable
// `var` (read when the context is made) set to `value`, with rounded
// products when `rounded`; nothing where the backend has no rounded
// products (a host backend).
template <class Run>
std::optional<testing::Outputs> run_with_env(const std::string& backend, const char* var,
                                             const char* value, bool rounded, const Run& run) {
  ::setenv(var, value, 1);
  Context ctx(backend, 1);
  const bool has_modes = ctx.resources() && ctx.resources()->set_bf16_compute(rounded);
  std::optional<testing::Outputs> got;
  if (!rounded || has_modes) got = run(ctx);
  ::unsetenv(var);
  return got;
}

TEST_P(SsdScanTest, ChunkedConfigurationsMatchRef) {
  int config = 0;
  for (int64_t chunk : {1, 7, 64, 256})
    for (int64_t L : {1, 13, 100, 300})
      for (int64_t G : {1, 2, 4})
        for (int64_t B : {1, 3}) {
          ++config;
          for (int state_kind = 0; state_kind < 3; ++state_kind) {  // none, zeros, random
            const int64_t H = G == 1 ? 4 : 8;
            // Every configuration in every layout, each with another state.
            const SsdLayout layout = static_cast<SsdLayout>((config + state_kind) % 3);
            SCOPED_TRACE(::testing::Message()
                         << "chunk " << chunk << " L " << L << " G " << G << " B " << B << " state "
                         << state_kind << " layout " << static_cast<int>(layout));
            SsdProblem p = SsdProblem::random(B, L, H, 8, 16, G, 1000 + chunk * 7 + L + G,
                                              /*with_D=*/!(L == 13 && G == 2), state_kind == 2);
            if (state_kind == 1) p.state = Tensor::zeros(DType::kF32, {B, H, 8, 16});
            auto run = [&](Context& ctx) -> testing::Outputs {
              Tensor y_rows;
              const ops::SsdScanArgs a = testing::ssd_args_on(ctx, p, layout, chunk, &y_rows);
              ops::ssd_scan(ctx, a);
              return testing::outputs({{"y", y_rows}, {"state", a.state}});
            };
            testing::expect_matches_ref(GetParam(), run, {.tol = kScanTol});
          }
        }
}

// Larger states, with a carried state, over two chunks: N = 256 takes the
// cuda backend's chunked kernels since the output kernel's tiles shrank (K
// and the entering state share their shared memory); N = 300 (304 padded)
// is past them, the sequential kernel's.
TEST_P(SsdScanTest, LargeStatesMatchRef) {
  for (const int64_t N : {int64_t{256}, int64_t{300}}) {
    SCOPED_TRACE(::testing::Message() << "N " << N);
    const SsdProblem p = SsdProblem::random(1, 70, 2, 8, N, 1, 500 + N);
    testing::expect_matches_ref(
        GetParam(),
        [&](Context& ctx) -> testing::Outputs {
          Tensor y_rows;
          const ops::SsdScanArgs a = testing::ssd_args_on(ctx, p, SsdLayout::kDense, 64, &y_rows);
          ops::ssd_scan(ctx, a);
          return testing::outputs({{"y", y_rows}, {"state", a.state}});
        },
        {.tol = kScanTol});
  }
}

// Scanning [0, 37), then one step, then [38, 90), each from the state the
// last left, equals one scan.
TEST_P(SsdScanTest, SplittingASequenceCarriesTheState) {
  const SsdProblem whole = SsdProblem::random(2, 90, 4, 8, 16, 2, 77, true, false);
  Context ctx(GetParam(), 2);
  ops::SsdScanArgs one = testing::ssd_args_on(ctx, whole, SsdLayout::kDense, 16);
  one.state = on(ctx, Tensor::zeros(DType::kF32, {2, 4, 8, 16}));
  ops::ssd_scan(ctx, one);
  const Tensor y_whole = host(one.y);
  const Tensor state = on(ctx, Tensor::zeros(DType::kF32, {2, 4, 8, 16}));
  for (const auto& range : {std::pair<int64_t, int64_t>{0, 37}, {37, 38}, {38, 90}}) {
    // Not a structured binding: clang 14 cannot capture those in a lambda.
    const int64_t t0 = range.first, t1 = range.second;
    // A time slice of several batch rows has no single row stride: copy it.
    auto part_of = [&](const Tensor& t) { return t.slice(1, t0, t1).clone(); };
    SsdProblem part = whole;
    part.L = t1 - t0;
    part.x = part_of(whole.x), part.Bm = part_of(whole.Bm), part.Cm = part_of(whole.Cm);
    part.dt = part_of(whole.dt);
    ops::SsdScanArgs a = testing::ssd_args_on(ctx, part, SsdLayout::kDense, 16);
    a.state = state;
    ops::ssd_scan(ctx, a);
    EXPECT_TRUE(testing::close(host(a.y), y_whole.slice(1, t0, t1), kScanTol)) << t0 << ".." << t1;
  }
  EXPECT_TRUE(testing::close(state, one.state, kScanTol));
}

// Decoding: L = 1 per call (the step kernel), each step's x, B, C a time
// slice of the conv output's rows, equals ref's scan of the whole sequence.
TEST_P(SsdScanTest, StepsEqualTheSequentialScan) {
  struct Heads {
    int64_t B, H, P, N, G;
  };
  for (const Heads s : {Heads{1, 4, 8, 16, 1}, {3, 6, 4, 20, 2}, {2, 8, 16, 7, 4}}) {
    SCOPED_TRACE(::testing::Message() << "B " << s.B << " H " << s.H << " G " << s.G);
    const int64_t L = 9;
    const SsdProblem p = SsdProblem::random(s.B, L, s.H, s.P, s.N, s.G, 5 + s.H);
    Context ref_ctx("ref", 1);
    const ops::SsdScanArgs want = testing::ssd_args_on(ref_ctx, p, SsdLayout::kDense, 256);
    ops::ssd_scan(ref_ctx, want);
    for (int threads : {1, 2}) {
      Context ctx(GetParam(), threads);
      const ops::SsdScanArgs seq = testing::ssd_args_on(ctx, p, SsdLayout::kLayerRows, 256);
      for (int64_t t = 0; t < L; ++t) {
        auto at = [t](const Tensor& v) { return v.slice(1, t, t + 1); };
        ops::SsdScanArgs step = seq;
        step.x = at(seq.x), step.B = at(seq.B), step.C = at(seq.C), step.dt = at(seq.dt);
        step.y = at(seq.y);
        ops::ssd_scan(ctx, step);
      }
      EXPECT_TRUE(testing::close(seq.y, want.y)) << threads << " threads";
      EXPECT_TRUE(testing::close(seq.state, want.state)) << threads << " threads";
    }
  }
}

// The same map written as one sum over time (SPEC §3's SSD form without
// chunks), in double:
//   y_t = D x_t + sum_{s<=t} (C_t . B_s) exp(A sum_{s<k<=t} dt_k) dt_s x_s
//             + exp(A sum_{k<=t} dt_k) S_0 C_t,
// and the final state likewise.
void quadratic_form(const SsdProblem& p, std::vector<double>& y, std::vector<double>& state) {
  const int64_t HP = p.H * p.P, GN = p.G * p.N, PN = p.P * p.N;
  auto f = [](const Tensor& t, int64_t i) { return static_cast<double>(t.data<float>()[i]); };
  y.assign(p.B * p.L * HP, 0.0);
  state.assign(p.B * p.H * PN, 0.0);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h) {
      const int64_t g = h / (p.H / p.G);
      const double A = f(p.A, h);
      // logdecay(s, t) = A sum_{s<k<=t} dt_k, from prefix sums.
      std::vector<double> cum(p.L + 1, 0.0);
      for (int64_t t = 0; t < p.L; ++t) cum[t + 1] = cum[t] + A * f(p.dt, (b * p.L + t) * p.H + h);
      auto x = [&](int64_t t, int64_t i) { return f(p.x, (b * p.L + t) * HP + h * p.P + i); };
      auto Bv = [&](int64_t t, int64_t n) { return f(p.Bm, (b * p.L + t) * GN + g * p.N + n); };
      auto Cv = [&](int64_t t, int64_t n) { return f(p.Cm, (b * p.L + t) * GN + g * p.N + n); };
      auto S0 = [&](int64_t i, int64_t n) {
        return p.state.defined() ? f(p.state, (b * p.H + h) * PN + i * p.N + n) : 0.0;
      };
      for (int64_t t = 0; t < p.L; ++t)
        for (int64_t i = 0; i < p.P; ++i) {
          double acc = p.D.defined() ? f(p.D, h) * x(t, i) : 0.0;
          for (int64_t s = 0; s <= t; ++s) {
            double cb = 0;
            for (int64_t n = 0; n < p.N; ++n) cb += Cv(t, n) * Bv(s, n);
            acc +=
                cb * std::exp(cum[t + 1] - cum[s + 1]) * f(p.dt, (b * p.L + s) * p.H + h) * x(s, i);
          }
          for (int64_t n = 0; n < p.N; ++n) acc += std::exp(cum[t + 1]) * S0(i, n) * Cv(t, n);
          y[(b * p.L + t) * HP + h * p.P + i] = acc;
        }
      for (int64_t i = 0; i < p.P; ++i)
        for (int64_t n = 0; n < p.N; ++n) {
          double s_end = std::exp(cum[p.L]) * S0(i, n);
          for (int64_t s = 0; s < p.L; ++s)
            s_end += std::exp(cum[p.L] - cum[s + 1]) * f(p.dt, (b * p.L + s) * p.H + h) * x(s, i) *
                     Bv(s, n);
          state[(b * p.H + h) * PN + i * p.N + n] = s_end;
        }
    }
}

Tensor from_doubles(const std::vector<double>& v, const Shape& shape) {
  Tensor t = Tensor::empty(DType::kF32, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
  return t;
}

TEST_P(SsdScanTest, EqualsTheQuadraticForm) {
  for (bool with_state : {false, true}) {
    const SsdProblem p = SsdProblem::random(2, 20, 4, 3, 5, 2, 41, true, with_state);
    std::vector<double> y, state;
    quadratic_form(p, y, state);
    Context ctx(GetParam(), 2);
    ops::SsdScanArgs a = testing::ssd_args_on(ctx, p, SsdLayout::kDense, 6);
    if (!with_state) a.state = on(ctx, Tensor::zeros(DType::kF32, {2, 4, 3, 5}));
    ops::ssd_scan(ctx, a);
    // ref rounds its double result once; other backends sum in float.
    const testing::Tolerance tol = GetParam() == "ref" ? testing::Tolerance{2e-7, 1e-7} : kScanTol;
    EXPECT_TRUE(testing::close(a.y, from_doubles(y, {2, 20, 12}), tol)) << "state " << with_state;
    EXPECT_TRUE(testing::close(a.state, from_doubles(state, {2, 4, 3, 5}), tol))
        << "state " << with_state;
  }
}

// A context that rounds its products (training with --bf16, or cuda's
// SSM_CUDA_ROUND_ACTIVATIONS=1) may run the chunked scan's products as one
// TF32 product each: near ref at TF32's precision, and not the exact path's
// bits (so the mode is seen to take effect). Host backends have no such mode.
TEST_P(SsdScanTest, RoundedProductsStayNearRef) {
  Context ctx(GetParam(), 1), exact(GetParam(), 1), ref("ref", 1);
  if (!(ctx.resources() && ctx.resources()->set_bf16_compute(true)))
    GTEST_SKIP() << GetParam() << " has no rounded products";
  const SsdProblem p = SsdProblem::random(2, 300, 8, 64, 128, 1, 77);
  auto run = [&](Context& c) {
    Tensor y_rows;
    const ops::SsdScanArgs a = testing::ssd_args_on(c, p, SsdLayout::kLayerRows, 256, &y_rows);
    ops::ssd_scan(c, a);
    return testing::outputs({{"y", y_rows}, {"state", a.state}});
  };
  const testing::Outputs rounded = run(ctx), precise = run(exact), want = run(ref);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(testing::close(rounded[i].second, want[i].second, {3e-3, 1e-4})) << want[i].first;
    EXPECT_TRUE(testing::close(precise[i].second, want[i].second, kScanTol)) << want[i].first;
  }
  EXPECT_FALSE(testing::bitwise_equal(rounded[0].second, precise[0].second));
}

// The cuda backend's output kernel takes several heads of a group a block
// (C B^T made once for them): as many as SSM_CUDA_SCAN_HEADS says (1, 2, 4
// or 8), else chosen by the launch. Whatever it takes, every head sums in
// the same order: the same bits, near ref, in the exact and the rounded
// modes; on groups of 8 and 4 heads, a length off the chunk (150: a partial
// last chunk), batch rows, D and a carried state, and the 130m head shape
// (P = 64, N = 128). Other backends ignore the variable.
TEST_P(SsdScanTest, HeadsPerBlockGiveTheSameBits) {
  struct Shape {
    int64_t B, L, H, P, N, G;
  };
  for (const Shape& s : {Shape{2, 150, 16, 16, 32, 2}, Shape{1, 100, 4, 64, 128, 1}})
    for (const bool rounded : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "H " << s.H << " G " << s.G << " rounded " << rounded);
      const SsdProblem p = SsdProblem::random(s.B, s.L, s.H, s.P, s.N, s.G, 300 + s.H);
      Context ref("ref", 1);
      auto run = [&](Context& c) {
        Tensor y_rows;
        const ops::SsdScanArgs a = testing::ssd_args_on(c, p, SsdLayout::kLayerRows, 64, &y_rows);
        ops::ssd_scan(c, a);
        return testing::outputs({{"y", y_rows}, {"state", a.state}});
      };
      const testing::Outputs want = run(ref);
      std::optional<testing::Outputs> first;
      for (const char* heads : {"1", "2", "4", "8", ""}) {
        SCOPED_TRACE(::testing::Message() << "SSM_CUDA_SCAN_HEADS '" << heads << "'");
        const std::optional<testing::Outputs> ran =
            run_with_env(GetParam(), "SSM_CUDA_SCAN_HEADS", heads, rounded, run);
        if (!ran) break;
        const testing::Outputs& got = *ran;
        const testing::Tolerance tol = rounded ? testing::Tolerance{3e-3, 1e-4} : kScanTol;
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_TRUE(testing::close(got[i].second, want[i].second, tol)) << want[i].first;
          if (first) {
            EXPECT_TRUE(testing::bitwise_equal(got[i].second, (*first)[i].second)) << want[i].first;
          }
        }
        if (!first) first = got;
      }
    }
}

// BF16 state products (a model whose projections run in BF16): near ref at
// BF16's precision on the 130m shapes and on odd ones (partial chunks of an
// odd length, P and N off the vector width, groups, batch rows, a carried
// state); a backend without such products computes exactly as without the
// flag, and the cpu backend on a CPU with AVX-512 BF16 does not (so the
// mode is seen to take effect).
TEST_P(SsdScanTest, Bf16StateProductsStayNearRef) {
  Context ctx(GetParam(), 2), ref("ref", 1);
  struct Shape {
    int64_t B, L, H, P, N, G, chunk;
  };
  for (const Shape& s : {Shape{1, 300, 8, 64, 128, 1, 64}, Shape{3, 37, 4, 7, 13, 2, 8},
                         Shape{2, 100, 4, 8, 16, 1, 256}}) {
    SCOPED_TRACE(::testing::Message() << "L " << s.L << " P " << s.P << " N " << s.N);
    const SsdProblem p = SsdProblem::random(s.B, s.L, s.H, s.P, s.N, s.G, 91 + s.L);
    auto run = [&](Context& c, bool bf16) {
      Tensor y_rows;
      ops::SsdScanArgs a = testing::ssd_args_on(c, p, SsdLayout::kLayerRows, s.chunk, &y_rows);
      a.bf16_state_products = bf16;
      ops::ssd_scan(c, a);
      return testing::outputs({{"y", y_rows}, {"state", a.state}});
    };
    const testing::Outputs rounded = run(ctx, true), precise = run(ctx, false),
                           want = run(ref, false);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(testing::close(rounded[i].second, want[i].second, {1e-2, 1e-3})) << want[i].first;
    const bool has_bf16 = GetParam() == "cpu" && cpu::cpu_bf16_dot_products_fast();
    EXPECT_EQ(testing::bitwise_equal(rounded[0].second, precise[0].second), !has_bf16);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SsdScanTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm

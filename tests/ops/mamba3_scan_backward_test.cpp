// mamba3_scan_backward on every backend against ref (back-propagation
// through the recurrence in double), over SISO and MIMO ranks, chunks that
// do or do not divide the length (one step, smaller than R, one chunk for
// all), batch > 1, saved and fresh starting states, L = 1, with and without
// D (whose gradient accumulates); 1 and 2 threads give identical results.
// The reference itself against centred differences of its forward in double.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ops/mamba3_scan_util.h"
#include "ops/ref/mamba3_ref.h"

namespace ssm {
namespace {

using testing::close;
using testing::random_tensor;
using testing::Tolerance;
using namespace testing::m3;

// {B, L, H, P, N, R, chunk, state, D}; the old suite's cases first.
const ScanCase kCases[] = {
    {1, 11, 2, 3, 4, 1, 4, false},
    {2, 11, 2, 3, 4, 2, 4, false},
    {1, 10, 2, 3, 4, 2, 8},
    {2, 9, 2, 3, 4, 1, 5},
    {1, 5, 2, 3, 4, 1, 1, false},
    {1, 7, 2, 3, 4, 2, 64},
    {2, 13, 2, 3, 4, 2, 6},
    {2, 21, 3, 8, 16, 1, 8},
    {1, 23, 2, 8, 16, 4, 8},
    {2, 9, 3, 8, 8, 4, 3},
    {1, 70, 2, 16, 32, 1, 64},
    {2, 1, 2, 4, 8, 2, 8},
    {1, 1, 3, 5, 8, 1, 64, false},
    {2, 12, 2, 4, 8, 1, 4, true, false},
    // Several of a device backend's own chunks (64 rows of (time, rank)):
    // whole chunks, a short last one, carried states or fresh, every rank.
    {1, 128, 2, 8, 16, 1, 64},
    {2, 150, 2, 4, 8, 2, 64},
    {1, 64, 2, 8, 8, 4, 16, false},
    {1, 37, 2, 4, 8, 4, 16, true, false},
};

// The chunked backward runs its products in F32 (sums of dwd, dcs and the
// final scalars in double); against the double reference it stays near 1e-6.
constexpr Tolerance kTol{1e-5, 1e-6};

struct ScanGrads {
  Tensor d_o, dD;
  ScanGrads(const ScanCase& c, uint64_t seed) {
    d_o = random_tensor({c.B, c.H, c.L, c.R, c.P}, seed);
    dD = maybe_random(c.skip, {c.H}, seed + 1);  // accumulated into
  }
};

ops::Mamba3ScanBackwardArgs backward_args(const ScanCase& c, const ops::Mamba3ScanArgs& fwd,
                                          const ScanGrads& gr, const Place& pl) {
  ops::Mamba3ScanBackwardArgs g{.fwd = fwd};
  g.d_o = pl.put(gr.d_o);
  g.dq = pl.nan(fwd.q.shape());
  g.dk = pl.nan(fwd.k.shape());
  g.dv = pl.nan(fwd.v.shape());
  for (Tensor* t : {&g.ddt, &g.dA, &g.dlam}) *t = pl.nan({c.B, c.H, c.L});
  g.dD = pl.put(gr.dD);
  return g;
}

Named grads(const ops::Mamba3ScanBackwardArgs& g) {
  return {{"dq", g.dq}, {"dk", g.dk},     {"dv", g.dv}, {"ddt", g.ddt},
          {"dA", g.dA}, {"dlam", g.dlam}, {"dD", g.dD}};
}

class Mamba3ScanBackward : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba3ScanBackward, MatchesRef) {
  for (const ScanCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const ScanInputs in(c, 300 + c.L * 7 + c.R);
    const ScanGrads gr(c, 400 + c.L);
    auto run = [&](Context& ctx) {
      // The backward reads the forward's inputs and its starting state only.
      ops::Mamba3ScanBackwardArgs g =
          backward_args(c, scan_args(c, in, Place::of(ctx)), gr, Place::of(ctx));
      ops::mamba3_scan_backward(ctx, g);
      return grads(g);
    };
    Context ref("ref", 1);
    expect_matches(GetParam(), run(ref), run, kTol);
  }
}

// A context that rounds its products (training with --bf16) runs the chunk
// passes on the tensor cores where their tiles fit, one TF32 product each
// (cuda: mamba3_scan_backward_tiles.cu): near ref at TF32's precision
// (10-bit mantissas: each product's inputs rounded by up to 4.9e-4
// relative), repeatable bit for bit, and not the exact path's bits (so the
// mode is seen to take effect). Cases: the 130m-shaped SISO head (several
// chunks, a short last one), P and N off the tile sizes at R = 2, MIMO R = 4
// with a fresh state and no D. Host backends have no such mode.
constexpr Tolerance kRoundedTol{2e-3, 1e-5};

TEST_P(Mamba3ScanBackward, RoundedProductsStayNearRef) {
  {
    Context probe(GetParam(), 1);
    if (!(probe.resources() && probe.resources()->set_bf16_compute(true)))
      GTEST_SKIP() << GetParam() << " has no rounded products";
  }
  for (const ScanCase& c : {ScanCase{1, 150, 2, 64, 128, 1, 64}, ScanCase{2, 70, 2, 7, 13, 2, 64},
                            ScanCase{1, 37, 2, 8, 16, 4, 16, false, false}}) {
    SCOPED_TRACE(::testing::Message() << c);
    const ScanInputs in(c, 500 + c.L * 7 + c.R);
    const ScanGrads gr(c, 600 + c.L);
    auto run = [&](Context& ctx) {
      ops::Mamba3ScanBackwardArgs g =
          backward_args(c, scan_args(c, in, Place::of(ctx)), gr, Place::of(ctx));
      ops::mamba3_scan_backward(ctx, g);
      return grads(g);
    };
    Context ref("ref", 1), exact(GetParam(), 1), rounded(GetParam(), 1), again(GetParam(), 1);
    ASSERT_TRUE(rounded.resources()->set_bf16_compute(true));
    ASSERT_TRUE(again.resources()->set_bf16_compute(true));
    const Named want = run(ref), precise = run(exact), got = run(rounded), repeat = run(again);
    for (size_t i = 0; i < want.size(); ++i) {
      if (!want[i].second.defined()) continue;
      EXPECT_TRUE(close(got[i].second, want[i].second, kRoundedTol)) << want[i].first;
      EXPECT_TRUE(identical(got[i].second, repeat[i].second)) << want[i].first;
      if (std::getenv("SSM_PRINT_ERRORS"))
        std::cout << "[error] rounded " << want[i].first << " "
                  << testing::max_rel_error(testing::host(got[i].second), testing::host(want[i].second)) << "\n";
    }
    EXPECT_FALSE(identical(got[0].second, precise[0].second));  // dq
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Mamba3ScanBackward, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

// Centred differences, h = 1e-6 in double: ~1e-9 of gradients of order one.
constexpr double kFdTol = 1e-6;

TEST(Mamba3RefScan, BackwardMatchesFiniteDifferences) {
  for (const ScanCase& c :
       {ScanCase{1, 6, 2, 3, 4, 1, 4, false}, ScanCase{2, 5, 2, 3, 4, 1, 4},
        ScanCase{1, 5, 2, 3, 4, 2, 4}, ScanCase{2, 4, 1, 2, 3, 4, 4}, ScanCase{1, 1, 2, 3, 4, 2, 4},
        ScanCase{1, 5, 2, 2, 3, 1, 4, true, false}}) {
    SCOPED_TRACE(::testing::Message() << c);
    const Place pl = Place::f64();
    ScanGrads gr(c, 900 + c.L);
    if (c.skip) gr.dD = Tensor::zeros(DType::kF32, {c.H});
    const ops::Mamba3ScanArgs a = scan_args(c, ScanInputs(c, 800 + c.L * 3 + c.R), pl);
    // The forward replaces its state: J starts each run from the saved one.
    const ops::Mamba3ScanArgs start = scan_args(c, ScanInputs(c, 800 + c.L * 3 + c.R), pl);
    const Tensor w = pl.put(gr.d_o);
    auto J = [&] {
      for (const auto& [dst, src] : {std::pair{a.ssm, start.ssm}, std::pair{a.k_prev, start.k_prev},
                                     std::pair{a.v_prev, start.v_prev}})
        if (dst.defined()) std::memcpy(const_cast<void*>(dst.raw()), src.raw(), src.nbytes());
      ref::mamba3_scan<double>(a);
      return weighted_sum(a.o, w);
    };
    const ops::Mamba3ScanBackwardArgs g = backward_args(c, start, gr, pl);
    ref::mamba3_scan_backward<double>(g);
    expect_fd({{"q", g.dq, a.q},
               {"k", g.dk, a.k},
               {"v", g.dv, a.v},
               {"dt", g.ddt, a.dt},
               {"A", g.dA, a.A},
               {"lam", g.dlam, a.lam},
               {"D", g.dD, a.D}},
              J, kFdTol);
  }
}

}  // namespace
}  // namespace ssm

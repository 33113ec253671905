// mamba3_output and its backward on every backend against ref: SISO and MIMO
// R = 2, 4, 18, P up to 64, the output norm on and off, batch > 1, L = 1, z, y, dy and dz as
// strided column blocks of wider tensors (as the layer passes them); 1 and 2
// threads, which give identical results. The reference's backward against
// centred differences of its forward in double.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/mamba3_test_util.h"
#include "ops/ref/mamba3_ref.h"

namespace ssm {
namespace {

using testing::close;
using testing::random_tensor;
using testing::Tolerance;
using namespace testing::m3;

struct OutCase {
  int64_t B, L, H, P, R;
  bool norm, mimo;
};
std::ostream& operator<<(std::ostream& os, const OutCase& c) {
  return os << "B" << c.B << " L" << c.L << " H" << c.H << " P" << c.P << " R" << c.R
            << (c.norm ? " norm" : "") << (c.mimo ? " MIMO" : " SISO");
}

const OutCase kCases[] = {
    {2, 5, 3, 4, 1, false, false}, {2, 5, 3, 4, 1, true, false}, {1, 7, 2, 8, 2, false, true},
    {2, 3, 2, 5, 2, true, true},   {1, 4, 2, 3, 4, true, true},  {3, 1, 4, 6, 1, true, false},
    {2, 1, 2, 4, 4, false, true},
    {1, 3, 2, 70, 2, true, true},  // P 70: channels past the ones cuda's lanes keep in registers
    // Whole vectors and a tail; more ranks than the op's batch of norm scales.
    {1, 3, 2, 40, 18, true, true}, {2, 2, 2, 64, 4, true, true},
};

constexpr Tolerance kTol{1e-5, 1e-6};

// Host F32 values of the inputs and of the gradients (parameter gradients
// start non-zero: the backward adds to them).
struct OutInputs {
  Tensor o, z_wide, mimo_z, mimo_o, norm, dy_wide, dmimo_z, dmimo_o, dnorm;
  OutInputs(const OutCase& c, uint64_t seed) {
    const int64_t HP = c.H * c.P;
    o = random_tensor({c.B, c.H, c.L, c.R, c.P}, seed, -2.f, 2.f);
    z_wide = random_tensor({c.B, c.L, HP + 3}, seed + 1, -3.f, 3.f);
    mimo_z = maybe_random(c.mimo, {c.H, c.R, c.P}, seed + 2);
    mimo_o = maybe_random(c.mimo, {c.H, c.R, c.P}, seed + 3);
    norm = maybe_random(c.norm, {HP}, seed + 4, 0.5f, 1.5f);
    dy_wide = random_tensor({c.B, c.L, HP + 1}, seed + 5);
    dmimo_z = maybe_random(c.mimo, {c.H, c.R, c.P}, seed + 6);
    dmimo_o = maybe_random(c.mimo, {c.H, c.R, c.P}, seed + 7);
    dnorm = maybe_random(c.norm, {HP}, seed + 8);
  }
};

ops::Mamba3OutputArgs output_args(const OutCase& c, const OutInputs& in, const Place& pl) {
  const int64_t HP = c.H * c.P;
  ops::Mamba3OutputArgs a{.rank = c.R};
  a.o = pl.put(in.o);
  a.z = pl.put(in.z_wide).cols(2, 2 + HP);
  a.mimo_z = pl.put(in.mimo_z);
  a.mimo_o = pl.put(in.mimo_o);
  a.norm = pl.put(in.norm);
  a.y = pl.nan({c.B, c.L, HP + 5}).cols(3, 3 + HP);
  return a;
}

ops::Mamba3OutputBackwardArgs output_backward_args(const OutCase& c, const OutInputs& in,
                                                   const ops::Mamba3OutputArgs& fwd,
                                                   const Place& pl) {
  const int64_t HP = c.H * c.P;
  ops::Mamba3OutputBackwardArgs g{.fwd = fwd};
  g.dy = pl.put(in.dy_wide).cols(1, 1 + HP);
  g.d_o = pl.nan(in.o.shape());
  g.dz = pl.nan({c.B, c.L, HP + 2}).cols(0, HP);
  g.dmimo_z = pl.put(in.dmimo_z);
  g.dmimo_o = pl.put(in.dmimo_o);
  g.dnorm = pl.put(in.dnorm);
  return g;
}

Named grads(const ops::Mamba3OutputBackwardArgs& g) {
  return {{"d_o", g.d_o},
          {"dz", g.dz},
          {"dmimo_z", g.dmimo_z},
          {"dmimo_o", g.dmimo_o},
          {"dnorm", g.dnorm}};
}

class Mamba3Output : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba3Output, MatchesRef) {
  Context ref("ref", 1);
  for (const OutCase& c : kCases) {
    // cuda's forward keeps a row's ranks in registers: at most 16, an error
    // past them (the R = 18 case is the cpu kernel's batches of 16 ranks).
    if (c.R > 16 && std::string(GetParam()) == "cuda") continue;
    SCOPED_TRACE(::testing::Message() << c);
    const OutInputs in(c, 600 + c.R * 2 + c.norm);
    auto run = [&](Context& ctx) {
      ops::Mamba3OutputArgs a = output_args(c, in, Place::of(ctx));
      ops::mamba3_output(ctx, a);
      return Named{{"y", a.y}};
    };
    expect_matches(GetParam(), run(ref), run, kTol);
  }
}

TEST_P(Mamba3Output, BackwardMatchesRef) {
  Context ref("ref", 1);
  for (const OutCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const OutInputs in(c, 700 + c.R * 2 + c.norm);
    auto run = [&](Context& ctx) {
      ops::Mamba3OutputBackwardArgs g =
          output_backward_args(c, in, output_args(c, in, Place::of(ctx)), Place::of(ctx));
      ops::mamba3_output_backward(ctx, g);
      return grads(g);
    };
    expect_matches(GetParam(), run(ref), run, kTol);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Mamba3Output, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

// Centred differences, h = 1e-6 in double: ~1e-9 of gradients of order one.
constexpr double kFdTol = 1e-6;

TEST(Mamba3RefOutput, BackwardMatchesFiniteDifferences) {
  for (const OutCase& c :
       {OutCase{2, 3, 2, 4, 1, false, false}, OutCase{2, 3, 2, 4, 1, true, false},
        OutCase{1, 3, 2, 3, 2, false, true}, OutCase{2, 3, 2, 3, 2, true, true},
        OutCase{2, 2, 2, 3, 4, true, true}}) {
    SCOPED_TRACE(::testing::Message() << c);
    const Place pl = Place::f64();
    OutInputs in(c, 650 + c.R);
    for (Tensor* t : {&in.dmimo_z, &in.dmimo_o, &in.dnorm})
      if (t->defined()) *t = Tensor::zeros(DType::kF32, t->shape());
    const ops::Mamba3OutputArgs a = output_args(c, in, pl);
    const Tensor w = pl.put(in.dy_wide).cols(1, 1 + c.H * c.P).clone();
    auto J = [&] {
      ref::mamba3_output<double>(a);
      return weighted_sum(a.y, w);
    };
    const ops::Mamba3OutputBackwardArgs g = output_backward_args(c, in, a, pl);
    ref::mamba3_output_backward<double>(g);
    expect_fd({{"o", g.d_o, a.o},
               {"z", g.dz, a.z},
               {"mimo_z", g.dmimo_z, a.mimo_z},
               {"mimo_o", g.dmimo_o, a.mimo_o},
               {"norm", g.dnorm, a.norm}},
              J, kFdTol);
  }
}

}  // namespace
}  // namespace ssm

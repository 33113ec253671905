// mamba3_prepare and its backward on every backend against ref: SISO
// (adjacent rotary pairs) and MIMO R = 2, 4 (halves), 0 to N/2 rotary angles,
// 1 to 3 groups, batch > 1, L = 1, the in_proj segments as strided column
// blocks, a random starting phase, the A floor active on some steps; 1 and 2
// threads, which give identical results. A sequence split in two, the phase
// carried, equals one pass.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/mamba3_prepare_util.h"

namespace ssm {
namespace {

using testing::close;
using testing::host;
using testing::Tolerance;
using namespace testing::m3;

const PrepCase kCases[] = {
    {2, 7, 4, 3, 8, 1, 1, 2, false},   // SISO, rope_fraction 0.5
    {1, 5, 4, 5, 8, 2, 1, 4, false},   // SISO, rope_fraction 1, 2 groups
    {2, 6, 4, 3, 8, 1, 1, 0, false},   // no rotary angles
    {2, 1, 2, 4, 16, 1, 1, 3, false},  // one step (decoding)
    {2, 9, 4, 3, 8, 2, 2, 2, true},    // MIMO R = 2, 2 groups
    {1, 4, 2, 4, 16, 1, 4, 8, true},   // MIMO R = 4, every pair rotated
    {3, 3, 6, 2, 4, 3, 2, 1, true},    // 3 groups, batch 3
    {2, 5, 5, 3, 256, 1, 2, 4, true},  // 512 entries a head: cuda's heads kernel a head a block
    {1, 3, 10, 4, 8, 1, 1, 2, false},  // 10 heads a group: cuda's head sums load 8 heads at a time
};

constexpr Tolerance kTol{1e-5, 1e-6};

// Per-row outputs (B, L, ...) and per-head ones (B, H, L, ...).
Named row_outputs(const ops::Mamba3PrepareArgs& a) {
  return {{"B_normed", a.B_normed}, {"C_normed", a.C_normed}, {"ang_rate", a.ang_rate}};
}
Named head_outputs(const ops::Mamba3PrepareArgs& a) {
  return {{"dt", a.dt}, {"A", a.A}, {"lam", a.lam},      {"q", a.q},
          {"k", a.k},   {"v", a.v}, {"phases", a.phases}};
}
Named outputs(const ops::Mamba3PrepareArgs& a) {
  Named all = row_outputs(a);
  for (auto& o : head_outputs(a)) all.push_back(o);
  all.emplace_back("phase", a.phase);
  return all;
}

ops::Mamba3PrepareArgs run_prepare(Context& ctx, const PrepCase& c, const PrepInputs& in,
                                   bool keep_phases = true) {
  ops::Mamba3PrepareArgs a = prepare_args(c, in, Place::of(ctx), keep_phases);
  ops::mamba3_prepare(ctx, a);
  return a;
}

class Mamba3Prepare : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba3Prepare, MatchesRef) {
  Context ref("ref", 1);
  int floored = 0;
  for (const PrepCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const PrepInputs in(c, 11 + c.L);
    const ops::Mamba3PrepareArgs want = run_prepare(ref, c, in);
    const Tensor A = host(want.A);
    for (int64_t i = 0; i < A.numel(); ++i) floored += A.data<float>()[i] == -kTestFloor;
    expect_matches(
        GetParam(), outputs(want), [&](Context& ctx) { return outputs(run_prepare(ctx, c, in)); },
        kTol);
  }
  EXPECT_GT(floored, 0) << "the A floor should be active somewhere";
}

// Sequences long enough that a device walks the phase in several runs.
// The F32 phase, a running sum over hundreds of steps, drifts from ref's
// past the F32 tolerance on every backend (the cpu's q and k: 1.4e-5 at 300
// steps), so these take a looser one; forward only, for that reason.
constexpr Tolerance kLongTol{5e-5, 1e-6};
const PrepCase kLongCases[] = {
    {2, 100, 2, 3, 8, 1, 1, 2, false},
    {1, 300, 2, 4, 16, 2, 2, 8, true},
    // cuda's phase blocks (and the backward's cumsum blocks) take 8 angles:
    // two groups, the second narrower, and 10 runs (not a power of two) to
    // scan; 130m's 32 angles.
    {2, 150, 2, 4, 32, 1, 1, 13, false},
    {1, 300, 2, 4, 64, 1, 1, 32, false},
};
TEST_P(Mamba3Prepare, LongSequencesMatchRef) {
  Context ref("ref", 1);
  for (const PrepCase& c : kLongCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const PrepInputs in(c, 11 + c.L);
    const ops::Mamba3PrepareArgs want = run_prepare(ref, c, in);
    expect_matches(
        GetParam(), outputs(want), [&](Context& ctx) { return outputs(run_prepare(ctx, c, in)); },
        kLongTol);
  }
}

TEST_P(Mamba3Prepare, PhasesAreOptional) {
  const PrepCase c = kCases[4];
  Context ctx(GetParam(), 2);
  const PrepInputs in(c, 3);
  const ops::Mamba3PrepareArgs with = run_prepare(ctx, c, in, true);
  const ops::Mamba3PrepareArgs without = run_prepare(ctx, c, in, false);
  EXPECT_FALSE(without.phases.defined());
  Named a = outputs(with), b = outputs(without);
  for (size_t i = 0; i < a.size(); ++i)
    if (b[i].second.defined()) {
      EXPECT_TRUE(identical(a[i].second, b[i].second)) << a[i].first;
    }
}

// The first l1 steps, then the rest from the phase the first part left.
TEST_P(Mamba3Prepare, SplitSequenceCarriesThePhase) {
  for (const PrepCase& c : {kCases[0], kCases[4]}) {
    SCOPED_TRACE(::testing::Message() << c);
    Context ctx(GetParam(), 2);
    const PrepInputs in(c, 17);
    const ops::Mamba3PrepareArgs full = run_prepare(ctx, c, in);
    const int64_t l1 = c.L / 2 + 1;
    PrepCase c1 = c, c2 = c;
    c1.L = l1;
    c2.L = c.L - l1;
    PrepInputs part = in;
    part.proj = in.proj.slice(1, 0, l1).clone();
    const ops::Mamba3PrepareArgs a1 = run_prepare(ctx, c1, part);
    part.proj = in.proj.slice(1, l1, c.L).clone();
    part.phase = host(a1.phase);
    const ops::Mamba3PrepareArgs a2 = run_prepare(ctx, c2, part);
    for (const auto& [which, a, t0, t1] :
         {std::tuple{"first part", &a1, int64_t{0}, l1}, std::tuple{"second part", &a2, l1, c.L}}) {
      const Named rows_got = row_outputs(*a), rows_want = row_outputs(full);
      for (size_t i = 0; i < rows_got.size(); ++i)
        EXPECT_TRUE(close(rows_got[i].second, host(rows_want[i].second).slice(1, t0, t1), kTol))
            << rows_got[i].first << ", " << which;
      const Named heads_got = head_outputs(*a), heads_want = head_outputs(full);
      for (size_t i = 0; i < heads_got.size(); ++i)
        EXPECT_TRUE(close(heads_got[i].second, host(heads_want[i].second).slice(2, t0, t1), kTol))
            << heads_got[i].first << ", " << which;
    }
    EXPECT_TRUE(close(a2.phase, full.phase, kTol)) << "final phase";
  }
}

Named grads(const ops::Mamba3PrepareBackwardArgs& g) {
  return {{"dq", g.dq},           {"dk", g.dk},
          {"dx", g.dx},           {"dB", g.dB},
          {"dC", g.dC},           {"dddt", g.dddt},
          {"dddA", g.dddA},       {"dtrap", g.dtrap},
          {"dang", g.dang},       {"ddt_bias", g.ddt_bias},
          {"dB_norm", g.dB_norm}, {"dC_norm", g.dC_norm},
          {"dB_bias", g.dB_bias}, {"dC_bias", g.dC_bias},
          {"dmimo_x", g.dmimo_x}};
}

class Mamba3PrepareBackward : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba3PrepareBackward, MatchesRef) {
  Context ref("ref", 1);
  for (const PrepCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const PrepInputs in(c, 21 + c.L);
    const PrepGrads gr(c, 31 + c.L);
    auto run = [&](Context& ctx) {
      const ops::Mamba3PrepareArgs fwd = run_prepare(ctx, c, in);
      ops::Mamba3PrepareBackwardArgs g = prepare_backward_args(c, fwd, gr, Place::of(ctx));
      ops::mamba3_prepare_backward(ctx, g);
      return grads(g);
    };
    expect_matches(GetParam(), run(ref), run, kTol);
  }
}

// The phase's gradient is a reverse running sum over the sequence: long
// sequences reach the cuda backend's segments of time and their scan. dq
// and dk are rotated back by the forward's F32 phases, which drift (above):
// the cpu's were 6.2e-5 off ref at 300 steps and 32 angles.
constexpr Tolerance kLongBackwardTol{2e-4, 1e-6};
TEST_P(Mamba3PrepareBackward, LongSequencesMatchRef) {
  Context ref("ref", 1);
  for (const PrepCase& c : kLongCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const PrepInputs in(c, 41 + c.L);
    const PrepGrads gr(c, 51 + c.L);
    auto run = [&](Context& ctx) {
      const ops::Mamba3PrepareArgs fwd = run_prepare(ctx, c, in);
      ops::Mamba3PrepareBackwardArgs g = prepare_backward_args(c, fwd, gr, Place::of(ctx));
      ops::mamba3_prepare_backward(ctx, g);
      return grads(g);
    };
    expect_matches(GetParam(), run(ref), run, kLongBackwardTol);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Mamba3Prepare, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);
INSTANTIATE_TEST_SUITE_P(Backends, Mamba3PrepareBackward,
                         ::testing::ValuesIn(testing::all_backends()), testing::backend_param_name);

}  // namespace
}  // namespace ssm

// ssd_step, the fused Mamba-2 decode step, on every backend against ref's
// (conv1d, ssd_prepare, ssd_scan and gated_rms_norm in order): the output,
// the convolution state and the scan state after the step, with the
// inputs as the layer passes them (column blocks of in_proj's row), the
// 130m shape, several groups, partial row blocks, odd state sizes, no norm
// and no biases, many sequences (cuda's wide and streamed paths); each
// sequence of a batch alone against it in the batch, bitwise; ref's op against those four ops called one by one, and
// the cpu's (its own fused loop) against its four ops, bitwise.
#include <gtest/gtest.h>

#include <iterator>
#include <vector>

#include "ops/against_ref.h"
#include "ssm/ops/conv1d.h"
#include "ssm/ops/rms_norm.h"
#include "ssm/ops/ssd.h"

namespace ssm {
namespace {

using testing::on;
using testing::random_tensor;

struct StepCase {
  int64_t B, H, P, N, G, K;
  int64_t norm_groups;  // 0: no norm weight (out = y silu(z))
  bool norm_before_gate, with_D, with_bias;
};
const StepCase kCases[] = {
    {1, 24, 64, 128, 1, 4, 1, false, true, true},  // Mamba-2 130m
    {3, 4, 8, 16, 2, 4, 2, true, false, false},
    {2, 6, 20, 40, 3, 3, 0, false, true, true},    // rows 16 + 4 per head
    {1, 2, 16, 300, 1, 2, 2, false, true, false},  // 32 threads of 10 entries a row
    {2, 2, 4, 600, 1, 4, 1, false, true, true},    // cuda: larger than its kernel, the four ops
    {52, 2, 80, 40, 2, 4, 2, false, true, true},   // cuda: many sequences, blocks of 64 rows + 16
    // cuda: many sequences, the state step streamed (ssd_step_wide.cu): G =
    // 2, 24 rows of a block's 64 (F32) or 128 (BF16); the 130m head's 16
    // threads a row; N not a multiple of 8 (ssd_step_kernel's wide blocks).
    {64, 4, 24, 64, 2, 4, 2, true, true, true},
    {32, 4, 64, 128, 1, 4, 1, false, true, true},
    {64, 3, 40, 36, 1, 4, 0, false, false, false},
};
constexpr size_t kManySequences = 5;
// The cases of many sequences (cuda: the wide and the streamed paths).
constexpr size_t kMany[] = {5, 6, 7, 8};

// The step's inputs on the host; in_proj's row is [z | xBC | dt] with a
// few columns of padding after it.
struct StepInputs {
  explicit StepInputs(const StepCase& s)
      : HP(s.H * s.P),
        C(HP + 2 * s.G * s.N),
        zxbcdt(random_tensor({s.B, 1, HP + C + s.H + 3}, 1, -2.f, 2.f)),
        conv_weight(random_tensor({C, 1, s.K}, 2, -0.5f, 0.5f)),
        conv_bias(random_tensor({C}, 3)),
        conv_state(random_tensor({s.B, s.K - 1, C}, 4)),
        dt_bias(random_tensor({s.H}, 5, -3.f, 0.f)),
        A_log(random_tensor({s.H}, 6, -1.f, 1.5f)),
        D(random_tensor({s.H}, 7)),
        norm_weight(random_tensor({HP}, 8, 0.5f, 1.5f)),
        state(random_tensor({s.B, s.H, s.P, s.N}, 9)) {}
  int64_t HP, C;
  Tensor zxbcdt, conv_weight, conv_bias, conv_state, dt_bias, A_log, D, norm_weight, state;
};

// Runs the step on ctx: fused (ssd_step) or as its four ops (three
// ungated: the gated norm left out).
testing::Outputs run_step(Context& ctx, const StepCase& s, const StepInputs& in, bool fused,
                          bool gated = true) {
  const Tensor row = on(ctx, in.zxbcdt), conv_state = on(ctx, in.conv_state),
               state = on(ctx, in.state);
  const Tensor z = row.cols(0, in.HP), xbc = row.cols(in.HP, in.HP + in.C);
  const Tensor dt_raw = row.cols(in.HP + in.C, in.HP + in.C + s.H);
  const Tensor out = on(ctx, Tensor::zeros(DType::kF32, {s.B, 1, in.HP}));
  const Tensor bias = s.with_bias ? on(ctx, in.conv_bias) : Tensor();
  const Tensor D = s.with_D ? on(ctx, in.D) : Tensor();
  const Tensor w = s.norm_groups ? on(ctx, in.norm_weight) : Tensor();
  const int64_t group = s.norm_groups ? in.HP / s.norm_groups : 0;
  const float dt_min = 0.01f, dt_max = 0.5f;
  if (fused) {
    ops::ssd_step(ctx, {.groups = s.G,
                        .z = z,
                        .xbc = xbc,
                        .dt_raw = dt_raw,
                        .conv_weight = on(ctx, in.conv_weight),
                        .conv_bias = bias,
                        .conv_state = conv_state,
                        .dt_bias = on(ctx, in.dt_bias),
                        .A_log = on(ctx, in.A_log),
                        .dt_min = dt_min,
                        .dt_max = dt_max,
                        .D = D,
                        .norm_weight = w,
                        .norm_group = group,
                        .eps = 1e-5f,
                        .norm_before_gate = s.norm_before_gate,
                        .state = state,
                        .out = out,
                        .gated = gated});
  } else {
    const Tensor x = on(ctx, Tensor::zeros(DType::kF32, {s.B, 1, in.C}));
    ops::conv1d(ctx, {.in = xbc,
                      .weight = on(ctx, in.conv_weight),
                      .bias = bias,
                      .state = conv_state,
                      .out = x,
                      .silu = true});
    const Tensor dt = on(ctx, Tensor::zeros(DType::kF32, {s.B, 1, s.H}));
    const Tensor A = on(ctx, Tensor::zeros(DType::kF32, {s.H}));
    ops::ssd_prepare(ctx, {.dt_raw = dt_raw,
                           .dt_bias = on(ctx, in.dt_bias),
                           .A_log = on(ctx, in.A_log),
                           .dt_min = dt_min,
                           .dt_max = dt_max,
                           .dt = dt,
                           .A = A});
    const Tensor y = gated ? on(ctx, Tensor::zeros(DType::kF32, {s.B, 1, in.HP})) : out;
    const int64_t GN = s.G * s.N;
    ops::ssd_scan(ctx, {.groups = s.G,
                        .x = x.cols(0, in.HP),
                        .B = x.cols(in.HP, in.HP + GN),
                        .C = x.cols(in.HP + GN, in.C),
                        .dt = dt,
                        .A = A,
                        .D = D,
                        .y = y,
                        .state = state});
    if (gated)
      ops::gated_rms_norm(ctx, {.y = y,
                                .z = z,
                                .w = w,
                                .group = group,
                                .eps = 1e-5f,
                                .norm_before_gate = s.norm_before_gate,
                                .out = out});
  }
  return testing::outputs({{"out", out}, {"conv_state", conv_state}, {"state", state}});
}

class SsdStepTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SsdStepTest, MatchesRef) {
  for (const StepCase& s : kCases) {
    for (const bool gated : {true, false}) {
      SCOPED_TRACE(::testing::Message()
                   << "B " << s.B << " H " << s.H << " P " << s.P << " N " << s.N << " G " << s.G
                   << " K " << s.K << " gated " << gated);
      const StepInputs in(s);
      testing::expect_matches_ref(GetParam(),
                                  [&](Context& ctx) { return run_step(ctx, s, in, true, gated); });
    }
  }
}

// A second step on the same states: the first left the convolution state
// shifted and (cuda) its counters back at zero.
TEST_P(SsdStepTest, TwoStepsMatchRef) {
  for (const size_t c : {size_t{1}, kManySequences, size_t{6}, size_t{7}}) {
    const StepCase& s = kCases[c];
    SCOPED_TRACE(::testing::Message() << "case " << c);
    const StepInputs in(s);
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) {
      testing::Outputs first = run_step(ctx, s, in, true, false);
      StepInputs next(s);
      next.conv_state = testing::host(first[1].second);
      next.state = testing::host(first[2].second);
      testing::Outputs second = run_step(ctx, s, next, true, false);
      second.insert(second.end(), first.begin(), first.end());
      return second;
    });
  }
}

// One sequence of a batch's inputs as a batch of its own.
StepInputs alone(const StepCase& s, const StepInputs& batch, int64_t b) {
  StepCase one = s;
  one.B = 1;
  StepInputs in(one);
  in.zxbcdt = batch.zxbcdt.rows(b, b + 1).clone();
  in.conv_state = batch.conv_state.rows(b, b + 1).clone();
  in.state = batch.state.rows(b, b + 1).clone();
  return in;
}

// A sequence's step gives the same bits whatever the batch around it (ssm
// serve batches sessions): at batch 1 cuda takes ssd_step_kernel's narrow
// blocks, with many sequences its wide blocks or the two launches of
// ssd_step_wide.cu. Two steps, F32 and BF16 states, three sequences of
// each batch.
TEST_P(SsdStepTest, ASequenceHasTheSameBitsAtAnyBatch) {
  for (const size_t c : kMany) {
    for (const bool bf16 : {false, true}) {
      const StepCase& s = kCases[c];
      SCOPED_TRACE(::testing::Message() << "case " << c << " bf16 " << bf16);
      StepCase one = s;
      one.B = 1;
      StepInputs batch(s);
      if (bf16) batch.state = batch.state.to_dtype(DType::kBF16);
      const int64_t picks[] = {0, s.B / 2, s.B - 1};
      std::vector<StepInputs> each;
      for (const int64_t b : picks) each.push_back(alone(s, batch, b));
      Context ctx(GetParam(), 2);
      for (int step = 0; step < 2; ++step) {
        const testing::Outputs got = run_step(ctx, s, batch, true);
        for (size_t i = 0; i < each.size(); ++i) {
          const testing::Outputs want = run_step(ctx, one, each[i], true);
          for (size_t k = 0; k < got.size(); ++k)
            EXPECT_TRUE(testing::bitwise_equal(testing::host(got[k].second).rows(picks[i], picks[i] + 1),
                                               testing::host(want[k].second)))
                << got[k].first << ", sequence " << picks[i] << ", step " << step;
          each[i].conv_state = testing::host(want[1].second);
          each[i].state = testing::host(want[2].second);
        }
        batch.conv_state = testing::host(got[1].second);
        batch.state = testing::host(got[2].second);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SsdStepTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

// The op's definition: ref's ssd_step equals its four ops called in turn
// (ungated: the first three).
TEST(SsdStepRef, EqualsItsFourOps) {
  for (const StepCase& s : kCases) {
    for (const bool gated : {true, false}) {
      const StepInputs in(s);
      Context ctx("ref", 1);
      const testing::Outputs fused = run_step(ctx, s, in, true, gated),
                             ops4 = run_step(ctx, s, in, false, gated);
      ASSERT_EQ(fused.size(), ops4.size());
      for (size_t i = 0; i < fused.size(); ++i)
        EXPECT_TRUE(testing::bitwise_equal(fused[i].second, ops4[i].second)) << fused[i].first;
    }
  }
}

// The cpu's fused step (the convolution of each head's x inside the step's
// loop over heads) gives the bits of its own four ops called in turn, on
// one and two threads, for two steps in a row (the convolution state the
// first leaves is the second's input).
TEST(SsdStepCpu, EqualsItsFourOpsBitwise) {
  std::vector<StepCase> cases(std::begin(kCases), std::end(kCases));
  cases.push_back(
      {2, 3, 20, 8, 1, 9, 1, false, true, true});  // more taps than the vector loop takes
  for (const StepCase& s : cases) {
    for (const bool gated : {true, false}) {
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << "B " << s.B << " H " << s.H << " P " << s.P << " K "
                                          << s.K << " gated " << gated << " threads " << threads);
        StepInputs fused_in(s), ops_in(s);
        Context ctx("cpu", threads);
        for (int step = 0; step < 2; ++step) {
          const testing::Outputs fused = run_step(ctx, s, fused_in, true, gated),
                                 ops4 = run_step(ctx, s, ops_in, false, gated);
          ASSERT_EQ(fused.size(), ops4.size());
          for (size_t i = 0; i < fused.size(); ++i)
            EXPECT_TRUE(testing::bitwise_equal(fused[i].second, ops4[i].second))
                << fused[i].first << ", step " << step;
          fused_in.conv_state = testing::host(fused[1].second);
          fused_in.state = testing::host(fused[2].second);
          ops_in.conv_state = testing::host(ops4[1].second);
          ops_in.state = testing::host(ops4[2].second);
        }
      }
    }
  }
}

// A BF16 state (ops/state_dtype.h): the fused step equals its definition
// on the same backend to the bit (the state widened, the step run with it
// in F32, the new state rounded to nearest even: the cpu reads and rounds
// the BF16 rows in place, cuda in its kernel, ref widens around its
// kernel), for two steps in a row.
TEST_P(SsdStepTest, Bf16StateIsItsDefinition) {
  for (const StepCase& s : kCases) {
    for (const bool gated : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "B " << s.B << " H " << s.H << " P " << s.P << " N "
                                        << s.N << " gated " << gated);
      StepInputs in16(s), in32(s);
      in16.state = in16.state.to_dtype(DType::kBF16);
      in32.state = in16.state.to_f32();
      Context ctx(GetParam(), 2);
      for (int step = 0; step < 2; ++step) {
        const testing::Outputs got = run_step(ctx, s, in16, true, gated),
                               def = run_step(ctx, s, in32, true, gated);
        EXPECT_TRUE(testing::bitwise_equal(got[0].second, def[0].second)) << "out, step " << step;
        EXPECT_TRUE(testing::bitwise_equal(got[1].second, def[1].second)) << "conv, step " << step;
        const Tensor rounded = def[2].second.to_dtype(DType::kBF16);
        EXPECT_TRUE(testing::bitwise_equal(got[2].second, rounded)) << "state, step " << step;
        in16.conv_state = in32.conv_state = testing::host(got[1].second);
        in16.state = testing::host(got[2].second);
        in32.state = in16.state.to_f32();
      }
    }
  }
}

}  // namespace
}  // namespace ssm

// conv1d and conv1d_backward on every backend against ref, over batch rows,
// lengths shorter and longer than the kernel, states in and out, strided
// rows; decoding step by step and splitting a sequence equal one pass to the
// last bit; ref's backward against finite differences in double.
#include "ops/ref/conv1d.h"

#include <gtest/gtest.h>

#include "ops/against_ref.h"
#include "ops/finite_differences.h"
#include "ssm/ops/conv1d.h"

namespace ssm {
namespace {

using testing::host;
using testing::in_block;
using testing::in_wider_rows;
using testing::on;
using testing::on_rows;
using testing::random_tensor;

class Conv1dTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Conv1dTest, MatchesRef) {
  for (int64_t B : {1, 3})
    for (int64_t L : {1, 2, 7, 70})
      for (int64_t C : {20, 130})
        for (int64_t K : {1, 2, 4})
          for (int variant = 0; variant < 4; ++variant) {
            // variant bits: state in/out, SiLU and bias (together), strided rows.
            const bool with_state = variant & 1, silu = variant & 2, strided = L % 2;
            SCOPED_TRACE(::testing::Message() << "B " << B << " L " << L << " C " << C << " K " << K
                                              << " variant " << variant);
            const uint64_t seed = B * 1000 + L * 10 + C + K * 7 + variant;
            const Tensor in = random_tensor({B, L, C}, seed),
                         w = random_tensor({C, 1, K}, seed + 1);
            const Tensor bias = random_tensor({C}, seed + 2);
            const Tensor state = random_tensor({B, K - 1, C}, seed + 3);
            testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
              const auto out = in_block(ctx, Tensor::zeros(DType::kF32, {B, L, C}), strided, 2, 3);
              const Tensor st = with_state ? on(ctx, state) : Tensor();
              ops::conv1d(ctx, {.in = on_rows(ctx, in, strided, 5, 1),
                                .weight = on(ctx, w),
                                .bias = silu ? on(ctx, bias) : Tensor(),
                                .state = st,
                                .out = out.view,
                                .silu = silu});
              return testing::outputs({{"out", out.rows}, {"state", st}});
            });
          }
}

// Decoding token by token (L = 1 with a state: the step path), reading each
// step's inputs as a time slice of the sequence's rows, equals one prefill:
// the taps run in the same order.
TEST_P(Conv1dTest, StepsEqualTheWholeSequence) {
  for (int64_t K : {1, 2, 4})
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "K " << K << " bias " << with_bias);
      const int64_t B = 3, L = 7, C = 300;
      const Tensor in_h = random_tensor({B, L, C}, 11), w_h = random_tensor({C, 1, K}, 12);
      const Tensor bias_h = random_tensor({C}, 13), init = random_tensor({B, K - 1, C}, 14);
      for (int threads : {1, 2}) {
        Context ctx(GetParam(), threads);
        const Tensor in = in_wider_rows(ctx, in_h, 0, 5), w = on(ctx, w_h);
        const Tensor bias = with_bias ? on(ctx, bias_h) : Tensor();
        const Tensor whole = on(ctx, Tensor::zeros(DType::kF32, {B, L, C}));
        const Tensor st_whole = on(ctx, init);
        ops::conv1d(ctx, {.in = in, .weight = w, .bias = bias, .state = st_whole, .out = whole});
        const Tensor steps = on(ctx, Tensor::zeros(DType::kF32, {B, L, C})), st = on(ctx, init);
        for (int64_t t = 0; t < L; ++t)
          ops::conv1d(ctx, {.in = in.slice(1, t, t + 1),
                            .weight = w,
                            .bias = bias,
                            .state = st,
                            .out = steps.slice(1, t, t + 1)});
        EXPECT_TRUE(testing::bitwise_equal(host(steps), host(whole))) << threads << " threads";
        EXPECT_TRUE(testing::bitwise_equal(host(st), host(st_whole))) << threads << " threads";
      }
    }
}

// Parts shorter than the state (K - 1 = 3), of one step, and longer, each
// starting from the state the previous left, equal one pass.
TEST_P(Conv1dTest, SplitSequenceCarriesTheState) {
  const int64_t B = 2, L = 10, C = 70, K = 4;
  const Tensor in_h = random_tensor({B, L, C}, 21), w_h = random_tensor({C, 1, K}, 22);
  const Tensor bias_h = random_tensor({C}, 23), init = random_tensor({B, K - 1, C}, 24);
  Context ctx(GetParam(), 2);
  const Tensor w = on(ctx, w_h), bias = on(ctx, bias_h);
  const Tensor whole = on(ctx, Tensor::zeros(DType::kF32, {B, L, C})), st_whole = on(ctx, init);
  ops::conv1d(ctx,
              {.in = on(ctx, in_h), .weight = w, .bias = bias, .state = st_whole, .out = whole});
  const Tensor st = on(ctx, init);
  const Tensor whole_h = host(whole);
  for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 2}, {2, 3}, {3, 10}}) {
    // A time slice of several batch rows has no single row stride: copy it.
    const Tensor part_in = on(ctx, in_h.slice(1, t0, t1).clone());
    const Tensor part = on(ctx, Tensor::zeros(DType::kF32, {B, t1 - t0, C}));
    ops::conv1d(ctx, {.in = part_in, .weight = w, .bias = bias, .state = st, .out = part});
    EXPECT_TRUE(testing::bitwise_equal(host(part), whole_h.slice(1, t0, t1))) << t0 << ".." << t1;
  }
  EXPECT_TRUE(testing::bitwise_equal(host(st), host(st_whole)));
}

TEST_P(Conv1dTest, BackwardMatchesRef) {
  struct Shape4 {
    int64_t B, L, C, K;
  };
  // {3, 100, 8, 4}: more rows than the cuda kernel's 128 runs, so that runs
  // of three rows cross sequence starts; K = 5: its kernels for longer filters.
  for (const Shape4 s : {Shape4{2, 9, 20, 4}, {1, 1, 5, 4}, {3, 30, 70, 3}, {1, 6, 17, 1},
                         {3, 100, 8, 4}, {2, 7, 9, 5}})
    for (int variant = 0; variant < 4; ++variant) {
      // variant bits: SiLU, parameter gradients wanted (and bias present).
      const bool silu = variant & 1, params = variant & 2, strided = s.L % 2;
      SCOPED_TRACE(::testing::Message() << "B " << s.B << " L " << s.L << " C " << s.C << " K "
                                        << s.K << " variant " << variant);
      const uint64_t seed = s.B * 100 + s.L + variant;
      const Tensor in = random_tensor({s.B, s.L, s.C}, seed),
                   w = random_tensor({s.C, 1, s.K}, seed + 1);
      const Tensor bias = random_tensor({s.C}, seed + 2),
                   dout = random_tensor({s.B, s.L, s.C}, seed + 3);
      const Tensor dw0 = random_tensor({s.C, 1, s.K}, seed + 4),
                   db0 = random_tensor({s.C}, seed + 5);
      testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
        const auto din = in_block(ctx, Tensor::zeros(DType::kF32, {s.B, s.L, s.C}), strided, 3, 3);
        const Tensor dw = params ? on(ctx, dw0) : Tensor(), db = params ? on(ctx, db0) : Tensor();
        ops::conv1d_backward(ctx, {.in = on_rows(ctx, in, strided, 1, 2),
                                   .weight = on(ctx, w),
                                   .bias = params ? on(ctx, bias) : Tensor(),
                                   .silu = silu,
                                   .dout = on_rows(ctx, dout, strided, 0, 4),
                                   .din = din.view,
                                   .dweight = dw,
                                   .dbias = db});
        return testing::outputs({{"din", din.rows}, {"dweight", dw}, {"dbias", db}});
      });
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, Conv1dTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

class Conv1dRef : public ::testing::TestWithParam<bool /*silu*/> {};

TEST_P(Conv1dRef, BackwardMatchesFiniteDifferences) {
  const int64_t B = 2, L = 9, C = 20, K = 4;
  Tensor in = testing::random_f64({B, L, C}, 12), w = testing::random_f64({C, 1, K}, 13);
  Tensor bias = testing::random_f64({C}, 14);
  const Tensor g = testing::random_f64({B, L, C}, 15);
  Context ctx("ref", 1);
  auto J = [&] {
    const Tensor out = testing::zeros_f64({B, L, C});
    ref::conv1d<double>(ctx, {.in = in, .weight = w, .bias = bias, .out = out, .silu = GetParam()});
    return testing::weighted_sum(out, g);
  };
  const Tensor gin = testing::fd_gradient(in, J), gw = testing::fd_gradient(w, J);
  const Tensor gb = testing::fd_gradient(bias, J);
  const Tensor din = testing::zeros_f64({B, L, C}), dw = testing::zeros_f64({C, 1, K});
  const Tensor db = testing::zeros_f64({C});
  ref::conv1d_backward<double>(ctx, {.in = in,
                                     .weight = w,
                                     .bias = bias,
                                     .silu = GetParam(),
                                     .dout = g,
                                     .din = din,
                                     .dweight = dw,
                                     .dbias = db});
  EXPECT_LE(testing::rel_error_f64(din, gin), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(dw, gw), testing::kFdTolerance);
  EXPECT_LE(testing::rel_error_f64(db, gb), testing::kFdTolerance);
}

INSTANTIATE_TEST_SUITE_P(Silu, Conv1dRef, ::testing::Bool());

}  // namespace
}  // namespace ssm

// The mixture-of-experts ops on every backend against ref: each router's
// choice and weights, routed experts of both activations over tokens that
// share experts unevenly (some experts idle), accumulate or not; the result
// is the same for any thread count; and ref's routed_experts equals the
// experts run one token at a time through the plain formulas here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ops/against_ref.h"
#include "ssm/ops/moe.h"

namespace ssm {
namespace {

using testing::host;
using testing::on;
using testing::on_rows;
using testing::random_tensor;

class MoeTest : public ::testing::TestWithParam<std::string> {};

Tensor ids_of(const std::vector<int64_t>& v, int64_t T, int64_t k) {
  Tensor t = Tensor::empty(DType::kI64, {T, k});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

TEST_P(MoeTest, RoutersMatchRef) {
  const int64_t T = 37, E = 8;
  // Logits spread wide so that no two are within rounding of each other.
  Tensor logits = random_tensor({T, E}, 5, -4.f, 4.f);
  const Tensor bias = random_tensor({E}, 6, -0.5f, 0.5f);
  for (ops::Router router : {ops::Router::kTopkSoftmax, ops::Router::kSoftmaxTopk, ops::Router::kSigmoidBiased})
    for (int64_t k : {1, 2, 8}) {
      SCOPED_TRACE(::testing::Message() << "router " << static_cast<int>(router) << " k " << k);
      const bool biased = router == ops::Router::kSigmoidBiased;
      Tensor ref_idx;
      testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
        const Tensor idx = Tensor::empty(DType::kI64, {T, k});
        const Tensor w = on(ctx, Tensor::zeros(DType::kF32, {T, k}));
        ops::moe_route(ctx, {.router = router, .k = k, .logits = on_rows(ctx, logits, true, 2, 3),
                             .bias = biased ? on(ctx, bias) : Tensor(), .normalize = true,
                             .scale = biased ? 2.5f : 1.f, .idx = idx, .weights = w});
        if (!ref_idx.defined()) ref_idx = idx.clone();
        EXPECT_TRUE(testing::bitwise_equal(idx, ref_idx)) << "expert choice differs from ref's";
        return testing::outputs({{"weights", w}});
      });
      // The weights of softmax-over-top-k and normalised sigmoid sum to 1 (x scale).
      if (router != ops::Router::kSoftmaxTopk) {
        Context ctx(GetParam(), 1);
        const Tensor idx = Tensor::empty(DType::kI64, {T, k});
        const Tensor w_on = on(ctx, Tensor::zeros(DType::kF32, {T, k}));
        ops::moe_route(ctx, {.router = router, .k = k, .logits = on(ctx, logits),
                             .bias = biased ? on(ctx, bias) : Tensor(), .scale = 1.f, .idx = idx,
                             .weights = w_on});
        const Tensor w = testing::host(w_on);
        for (int64_t t = 0; t < T; ++t) {
          double s = 0;
          for (int64_t j = 0; j < k; ++j) s += w.data<float>()[t * k + j];
          EXPECT_NEAR(s, 1.0, 1e-6) << t;
        }
      }
    }
}

TEST_P(MoeTest, RoutedExpertsMatchRef) {
  const int64_t T = 29, D = 24, F = 16, E = 6;
  for (ops::ExpertActivation act : {ops::ExpertActivation::kSiluGated, ops::ExpertActivation::kRelu2})
    for (int64_t k : {1, 3})
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "act " << static_cast<int>(act) << " k " << k << " acc " << accumulate);
        const int64_t rows = act == ops::ExpertActivation::kSiluGated ? 2 * F : F;
        const Tensor x = random_tensor({T, D}, 11), w1 = random_tensor({E, rows, D}, 12, -0.3f, 0.3f);
        const Tensor w2 = random_tensor({E, D, F}, 13, -0.3f, 0.3f), w = random_tensor({T, k}, 14, 0.f, 1.f);
        const Tensor start = random_tensor({T, D}, 15);
        std::vector<int64_t> ids;
        for (int64_t t = 0; t < T; ++t)
          for (int64_t j = 0; j < k; ++j) ids.push_back((t * 7 + j * 3) % (E - 1));  // expert E-1 idle
        const Tensor idx = ids_of(ids, T, k);
        testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
          const auto out = testing::in_block(ctx, start, true, 1, 4);
          ops::routed_experts(ctx, {.activation = act, .x = on_rows(ctx, x, true, 3, 0), .idx = idx,
                                    .weights = on(ctx, w), .w1 = on(ctx, w1), .w2 = on(ctx, w2),
                                    .out = out.view, .accumulate = accumulate});
          return testing::outputs({{"out", out.rows}});
        }, {.tol = {1e-5, 1e-6}});
      }
}

// Group-limited choice (n_group, topk_group) matches ref, and every chosen
// expert lies in one of the topk_group groups whose two best biased scores
// sum highest (checked here from the logits themselves).
TEST_P(MoeTest, GroupLimitedSigmoidRouterMatchesRefAndKeepsToTheBestGroups) {
  const int64_t T = 23, E = 12, n_group = 4, topk_group = 2, k = 3, S = E / n_group;
  const Tensor logits = random_tensor({T, E}, 7, -4.f, 4.f), bias = random_tensor({E}, 8, -0.5f, 0.5f);
  Tensor ref_idx;
  testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
    const Tensor idx = Tensor::empty(DType::kI64, {T, k});
    const Tensor w = on(ctx, Tensor::zeros(DType::kF32, {T, k}));
    ops::moe_route(ctx, {.router = ops::Router::kSigmoidBiased, .k = k, .logits = on(ctx, logits),
                         .bias = on(ctx, bias), .scale = 2.5f, .n_group = n_group,
                         .topk_group = topk_group, .idx = idx, .weights = w});
    if (!ref_idx.defined()) ref_idx = idx.clone();
    EXPECT_TRUE(testing::bitwise_equal(idx, ref_idx)) << "expert choice differs from ref's";
    return testing::outputs({{"weights", w}});
  });
  int64_t restricted = 0;  // tokens whose overall best k would have left the best groups
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> choice(E), score(n_group);
    for (int64_t e = 0; e < E; ++e)
      choice[e] = 1 / (1 + std::exp(-double(logits.data<float>()[t * E + e]))) + bias.data<float>()[e];
    for (int64_t g = 0; g < n_group; ++g) {
      std::vector<double> grp(choice.begin() + g * S, choice.begin() + (g + 1) * S);
      std::sort(grp.rbegin(), grp.rend());
      score[g] = grp[0] + grp[1];
    }
    std::vector<double> sorted = score;
    std::sort(sorted.rbegin(), sorted.rend());
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ref_idx.data<int64_t>()[t * k + j];
      EXPECT_GE(score[e / S], sorted[topk_group - 1]) << "token " << t << " expert " << e;
    }
    std::vector<double> all = choice;
    std::sort(all.rbegin(), all.rend());
    for (int64_t e = 0; e < E; ++e)
      if (choice[e] >= all[k - 1] && score[e / S] < sorted[topk_group - 1]) ++restricted;
  }
  EXPECT_GT(restricted, 0) << "the case never exercises the group limit";
  // Groups that cannot be scored or cannot hold k experts are refused.
  Context ctx(GetParam(), 1);
  const Tensor idx = Tensor::empty(DType::kI64, {T, k}), w = on(ctx, Tensor::zeros(DType::kF32, {T, k}));
  for (auto [g, tg] : {std::pair<int64_t, int64_t>{5, 1}, {12, 3}, {6, 1}, {4, 5}})
    EXPECT_THROW(ops::moe_route(ctx, {.router = ops::Router::kSigmoidBiased, .k = k, .logits = on(ctx, logits),
                                      .n_group = g, .topk_group = tg, .idx = idx, .weights = w}),
                 Error) << g << " " << tg;
}

// Per-expert tensors (HF's per-expert checkpoints) give what the stacked
// tensors holding the same numbers give, for both activations, on every
// backend against ref.
TEST_P(MoeTest, PerExpertTensorsEqualStackedOnes) {
  const int64_t T = 19, D = 16, F = 8, E = 4, k = 2;
  for (ops::ExpertActivation act : {ops::ExpertActivation::kSiluGated, ops::ExpertActivation::kRelu2}) {
    SCOPED_TRACE(static_cast<int>(act));
    const bool gated = act == ops::ExpertActivation::kSiluGated;
    const int64_t rows = gated ? 2 * F : F;
    const Tensor x = random_tensor({T, D}, 31), w1 = random_tensor({E, rows, D}, 32, -0.3f, 0.3f);
    const Tensor w2 = random_tensor({E, D, F}, 33, -0.3f, 0.3f), w = random_tensor({T, k}, 34, 0.f, 1.f);
    std::vector<int64_t> ids;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < k; ++j) ids.push_back((t * 5 + j) % E);
    const Tensor idx = ids_of(ids, T, k);
    Tensor stacked;
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
      std::vector<Tensor> gate, up, down;
      for (int64_t e = 0; e < E; ++e) {
        const Tensor rows_e = w1.reshape({E * rows, D}).rows(e * rows, (e + 1) * rows).clone();
        if (gated) gate.push_back(on(ctx, rows_e.rows(0, F).clone()));
        up.push_back(on(ctx, rows_e.rows(gated ? F : 0, rows).clone()));
        down.push_back(on(ctx, w2.reshape({E * D, F}).rows(e * D, (e + 1) * D).clone()));
      }
      const Tensor out = on(ctx, Tensor::zeros(DType::kF32, {T, D}));
      ops::routed_experts(ctx, {.activation = act, .x = on(ctx, x), .idx = idx, .weights = on(ctx, w),
                                .gate = gate, .up = up, .down = down, .out = out});
      const Tensor whole = on(ctx, Tensor::zeros(DType::kF32, {T, D}));
      ops::routed_experts(ctx, {.activation = act, .x = on(ctx, x), .idx = idx, .weights = on(ctx, w),
                                .w1 = on(ctx, w1), .w2 = on(ctx, w2), .out = whole});
      EXPECT_TRUE(testing::bitwise_equal(host(out), host(whole))) << "per-expert differs from stacked";
      return testing::outputs({{"out", out}});
    }, {.tol = {1e-5, 1e-6}});
    // Mixed or incomplete per-expert lists are refused.
    Context ctx(GetParam(), 1);
    std::vector<Tensor> up(E, on(ctx, random_tensor({F, D}, 35))), down(E - 1, on(ctx, random_tensor({D, F}, 36)));
    EXPECT_THROW(ops::routed_experts(ctx, {.activation = act, .x = on(ctx, x), .idx = idx, .weights = on(ctx, w),
                                           .up = up, .down = down,
                                           .out = on(ctx, Tensor::zeros(DType::kF32, {T, D}))}), Error);
  }
}

// One token through expert e by the formulas, in double.
std::vector<double> expert_by_hand(const Tensor& x, int64_t t, const Tensor& w1, const Tensor& w2, int64_t e,
                                   bool gated) {
  const int64_t D = x.dim(1), F = w2.dim(2), rows = w1.dim(1);
  std::vector<double> h(rows), out(D, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < D; ++d)
      h[r] += static_cast<double>(w1.data<float>()[(e * rows + r) * D + d]) * x.data<float>()[t * D + d];
  for (int64_t d = 0; d < D; ++d)
    for (int64_t f = 0; f < F; ++f) {
      const double a = gated ? h[f] / (1 + std::exp(-h[f])) * h[F + f] : std::pow(std::max(0.0, h[f]), 2);
      out[d] += static_cast<double>(w2.data<float>()[(e * D + d) * F + f]) * a;
    }
  return out;
}

TEST_P(MoeTest, RoutedExpertsAreTheWeightedSumOfEachTokensExperts) {
  const int64_t T = 5, D = 8, F = 4, E = 3, k = 2;
  const Tensor x = random_tensor({T, D}, 21), w1 = random_tensor({E, 2 * F, D}, 22);
  const Tensor w2 = random_tensor({E, D, F}, 23), w = random_tensor({T, k}, 24, 0.f, 1.f);
  const Tensor idx = ids_of({0, 2, 1, 0, 2, 1, 2, 0, 1, 2}, T, k);
  Context ctx(GetParam(), 2);
  const Tensor out = on(ctx, Tensor::zeros(DType::kF32, {T, D}));
  ops::routed_experts(ctx, {.x = on(ctx, x), .idx = idx, .weights = on(ctx, w), .w1 = on(ctx, w1),
                            .w2 = on(ctx, w2), .out = out});
  const Tensor got = host(out);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> want(D, 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const auto y = expert_by_hand(x, t, w1, w2, idx.data<int64_t>()[t * k + j], true);
      for (int64_t d = 0; d < D; ++d) want[d] += w.data<float>()[t * k + j] * y[d];
    }
    for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(got.data<float>()[t * D + d], want[d], 1e-5) << t << " " << d;
  }
}

TEST_P(MoeTest, RejectsExpertsOutOfRangeAndBadShapes) {
  Context ctx(GetParam(), 1);
  const Tensor x = on(ctx, random_tensor({2, 4}, 1)), w1 = on(ctx, random_tensor({3, 4, 4}, 2));
  const Tensor w2 = on(ctx, random_tensor({3, 4, 2}, 3)), w = on(ctx, random_tensor({2, 1}, 4));
  const Tensor out = on(ctx, Tensor::zeros(DType::kF32, {2, 4}));
  EXPECT_THROW(ops::routed_experts(ctx, {.x = x, .idx = ids_of({0, 3}, 2, 1), .weights = w, .w1 = w1,
                                         .w2 = w2, .out = out}), Error);
  EXPECT_THROW(ops::routed_experts(ctx, {.x = x, .idx = ids_of({0, 1}, 2, 1), .weights = w,
                                         .w1 = on(ctx, random_tensor({3, 5, 4}, 2)), .w2 = w2, .out = out}), Error);
  const Tensor idx = Tensor::empty(DType::kI64, {2, 5});
  EXPECT_THROW(ops::moe_route(ctx, {.k = 5, .logits = on(ctx, random_tensor({2, 4}, 5)), .idx = idx,
                                    .weights = on(ctx, Tensor::zeros(DType::kF32, {2, 5}))}), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, MoeTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm

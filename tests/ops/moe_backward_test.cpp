// The mixture-of-experts backwards on every backend against ref: each
// router's weight gradient to its logits, routed experts of both
// activations with stacked and per-expert weights, k 1 and 3, dx
// overwritten or accumulated; and ref's against centred differences of
// ref's forward (float tensors, so h = 1e-3 and tolerances near 1e-3).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "ops/against_ref.h"
#include "ssm/ops/moe.h"

namespace ssm {
namespace {

using testing::on;
using testing::on_rows;
using testing::random_tensor;

const ops::Router kRouters[] = {ops::Router::kTopkSoftmax, ops::Router::kSoftmaxTopk,
                                ops::Router::kSigmoidBiased};

struct Routed {
  Tensor idx, weights;
};
Routed route(const Tensor& logits, ops::Router router, int64_t k, const Tensor& bias, float scale) {
  Context ctx("ref", 1);
  Routed r{Tensor::empty(DType::kI64, {logits.dim(0), k}),
           Tensor::zeros(DType::kF32, {logits.dim(0), k})};
  const bool biased = router == ops::Router::kSigmoidBiased;
  ops::moe_route(ctx, {.router = router,
                       .k = k,
                       .logits = logits,
                       .bias = biased ? bias : Tensor(),
                       .scale = biased ? scale : 1.f,
                       .idx = r.idx,
                       .weights = r.weights});
  return r;
}

// Per-expert views of stacked weights (E, rows, cols) as HF's layout holds them.
struct PerExpert {
  std::vector<Tensor> gate, up, down;
};
PerExpert split(const Tensor& w1, const Tensor& w2, bool gated) {
  PerExpert p;
  const int64_t E = w1.dim(0), F = w2.dim(2);
  for (int64_t e = 0; e < E; ++e) {
    const Tensor rows = w1.index(e);
    if (gated) p.gate.push_back(rows.slice(0, 0, F).clone());
    p.up.push_back(rows.slice(0, gated ? F : 0, gated ? 2 * F : F).clone());
    p.down.push_back(w2.index(e).clone());
  }
  return p;
}

class MoeBackwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeBackwardTest, RouteBackwardMatchesRef) {
  const int64_t T = 37, E = 8;
  const Tensor logits = random_tensor({T, E}, 5, -4.f, 4.f),
               bias = random_tensor({E}, 6, -0.5f, 0.5f);
  for (ops::Router router : kRouters)
    for (int64_t k : {1, 2, 8})
      for (bool normalize : {true, false}) {
        if (!normalize && router != ops::Router::kSigmoidBiased) continue;
        SCOPED_TRACE(::testing::Message() << "router " << static_cast<int>(router) << " k " << k);
        const Routed r = route(logits, router, k, bias, 2.5f);
        const Tensor dw = random_tensor({T, k}, 7);
        testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
          const auto dl = testing::in_block(ctx, Tensor::zeros(DType::kF32, {T, E}), true, 1, 2);
          ops::moe_route_backward(ctx, {.router = router,
                                        .normalize = normalize,
                                        .scale = 2.5f,
                                        .logits = on_rows(ctx, logits, true, 2, 3),
                                        .idx = r.idx,
                                        .dweights = on(ctx, dw),
                                        .dlogits = dl.view});
          return testing::outputs({{"dlogits", dl.rows}});
        });
      }
}

TEST_P(MoeBackwardTest, RoutedExpertsBackwardMatchesRef) {
  const int64_t T = 29, D = 24, F = 16, E = 6;
  for (ops::ExpertActivation act :
       {ops::ExpertActivation::kSiluGated, ops::ExpertActivation::kRelu2})
    for (int64_t k : {1, 3})
      for (int variant = 0; variant < 3;
           ++variant) {  // 0 stacked, 1 stacked accumulate, 2 per expert
        SCOPED_TRACE(::testing::Message()
                     << "act " << static_cast<int>(act) << " k " << k << " variant " << variant);
        const bool gated = act == ops::ExpertActivation::kSiluGated;
        const int64_t rows = gated ? 2 * F : F;
        const Tensor x = random_tensor({T, D}, 11),
                     w1 = random_tensor({E, rows, D}, 12, -0.3f, 0.3f);
        const Tensor w2 = random_tensor({E, D, F}, 13, -0.3f, 0.3f);
        const Routed r = route(random_tensor({T, E}, 14, -3.f, 3.f), ops::Router::kTopkSoftmax, k,
                               Tensor(), 1.f);
        const Tensor dout = random_tensor({T, D}, 15), dx0 = random_tensor({T, D}, 16);
        const PerExpert pw = split(w1, w2, gated);
        testing::expect_matches_ref(
            GetParam(),
            [&](Context& ctx) -> testing::Outputs {
              ops::RoutedExpertsBackwardArgs a{
                  .fwd = {.activation = act,
                          .x = on_rows(ctx, x, true, 3, 1),
                          .idx = r.idx,
                          .weights = on(ctx, r.weights)},
                  .dout = on_rows(ctx, dout, true, 1, 1),
                  .dx = on(ctx, dx0.clone()),
                  .accumulate_dx = variant == 1,
                  .dweights = on(ctx, Tensor::zeros(DType::kF32, {T, k}))};
              const Tensor dw1 = on(ctx, random_tensor(w1.shape(), 17)),
                           dw2 = on(ctx, random_tensor(w2.shape(), 18));
              std::vector<Tensor> g, u, dn, dg, du, ddn;
              if (variant < 2) {
                a.fwd.w1 = on(ctx, w1), a.fwd.w2 = on(ctx, w2), a.dw1 = dw1, a.dw2 = dw2;
              } else {
                const PerExpert gw = split(testing::host(dw1), testing::host(dw2), gated);
                for (size_t e = 0; e < pw.up.size(); ++e) {
                  if (gated) g.push_back(on(ctx, pw.gate[e])), dg.push_back(on(ctx, gw.gate[e]));
                  u.push_back(on(ctx, pw.up[e])), du.push_back(on(ctx, gw.up[e]));
                  dn.push_back(on(ctx, pw.down[e])), ddn.push_back(on(ctx, gw.down[e]));
                }
                a.fwd.gate = g, a.fwd.up = u, a.fwd.down = dn, a.dgate = dg, a.dup = du,
                a.ddown = ddn;
              }
              ops::routed_experts_backward(ctx, a);
              testing::Outputs out = testing::outputs({{"dx", a.dx}, {"dweights", a.dweights}});
              // Outputs are host copies (the comparison reads them on the host).
              if (variant < 2) {
                out.push_back({"dw1", testing::host(dw1)});
                out.push_back({"dw2", testing::host(dw2)});
              } else {
                for (size_t e = 0; e < du.size(); ++e) {
                  if (gated) out.push_back({"dgate", testing::host(dg[e])});
                  out.push_back({"dup", testing::host(du[e])});
                  out.push_back({"ddown", testing::host(ddn[e])});
                }
              }
              return out;
            },
            {.tol = {2e-5, 2e-6}});
      }
}

INSTANTIATE_TEST_SUITE_P(Backends, MoeBackwardTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

// dJ/dv[i] by centred differences of J, v's float elements perturbed by h.
std::vector<double> fd(Tensor& v, const std::function<double()>& J, float h = 1e-3f) {
  std::vector<double> g(static_cast<size_t>(v.numel()));
  for (int64_t i = 0; i < v.numel(); ++i) {
    float& e = v.data<float>()[i];
    const float keep = e;
    e = keep + h;
    const double up = J();
    const double step = static_cast<double>(e) - keep;
    e = keep - h;
    const double down = J();
    e = keep;
    g[i] = (up - down) / (2 * step);
  }
  return g;
}

double rel_error(const Tensor& got, const std::vector<double>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got.data<float>()[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

double weighted(const Tensor& t, const Tensor& c) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    s += static_cast<double>(t.data<float>()[i]) * c.data<float>()[i];
  return s;
}

TEST(MoeBackwardRef, RouteBackwardMatchesFiniteDifferences) {
  const int64_t T = 5, E = 6;
  // Logits 1.2 apart (shuffled per token, a little noise) and a small bias:
  // no step of h changes which experts are chosen.
  Tensor logits = random_tensor({T, E}, 21, -0.05f, 0.05f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e)
      logits.data<float>()[t * E + e] += -3.f + 1.2f * static_cast<float>((e * 5 + t) % E);
  const Tensor bias = random_tensor({E}, 22, -0.02f, 0.02f);
  Context ctx("ref", 1);
  for (ops::Router router : kRouters)
    for (int64_t k : {1, 2, 4})
      for (bool normalize : {true, false}) {
        if (!normalize && router != ops::Router::kSigmoidBiased) continue;
        SCOPED_TRACE(::testing::Message() << "router " << static_cast<int>(router) << " k " << k);
        const bool biased = router == ops::Router::kSigmoidBiased;
        const Tensor c = random_tensor({T, k}, 23);
        const Routed r0 = route(logits, router, k, bias, 1.5f);
        auto J = [&] {
          const Tensor idx = Tensor::empty(DType::kI64, {T, k}),
                       w = Tensor::zeros(DType::kF32, {T, k});
          ops::moe_route(ctx, {.router = router,
                               .k = k,
                               .logits = logits,
                               .bias = biased ? bias : Tensor(),
                               .normalize = normalize,
                               .scale = biased ? 1.5f : 1.f,
                               .idx = idx,
                               .weights = w});
          EXPECT_TRUE(testing::bitwise_equal(idx, r0.idx)) << "a step changed the choice";
          return weighted(w, c);
        };
        const std::vector<double> want = fd(logits, J);
        const Tensor dl = Tensor::zeros(DType::kF32, {T, E});
        ops::moe_route_backward(ctx, {.router = router,
                                      .normalize = normalize,
                                      .scale = biased ? 1.5f : 1.f,
                                      .logits = logits,
                                      .idx = r0.idx,
                                      .dweights = c,
                                      .dlogits = dl});
        EXPECT_LE(rel_error(dl, want), 1e-3);
      }
}

TEST(MoeBackwardRef, RoutedExpertsBackwardMatchesFiniteDifferences) {
  const int64_t T = 4, D = 5, F = 3, E = 3, k = 2;
  Context ctx("ref", 1);
  for (ops::ExpertActivation act :
       {ops::ExpertActivation::kSiluGated, ops::ExpertActivation::kRelu2}) {
    SCOPED_TRACE(static_cast<int>(act));
    const int64_t rows = act == ops::ExpertActivation::kSiluGated ? 2 * F : F;
    Tensor x = random_tensor({T, D}, 31), w1 = random_tensor({E, rows, D}, 32),
           w2 = random_tensor({E, D, F}, 33);
    const Routed r =
        route(random_tensor({T, E}, 34, -3.f, 3.f), ops::Router::kSoftmaxTopk, k, Tensor(), 1.f);
    Tensor weights = r.weights.clone();
    const Tensor c = random_tensor({T, D}, 35);
    auto J = [&] {
      const Tensor out = Tensor::zeros(DType::kF32, {T, D});
      ops::routed_experts(ctx, {.activation = act,
                                .x = x,
                                .idx = r.idx,
                                .weights = weights,
                                .w1 = w1,
                                .w2 = w2,
                                .out = out});
      return weighted(out, c);
    };
    const std::vector<double> gx = fd(x, J), gw = fd(weights, J), g1 = fd(w1, J), g2 = fd(w2, J);
    const Tensor dw1 = Tensor::zeros(DType::kF32, w1.shape()),
                 dw2 = Tensor::zeros(DType::kF32, w2.shape());
    const Tensor dx = Tensor::zeros(DType::kF32, {T, D}),
                 dweights = Tensor::zeros(DType::kF32, {T, k});
    ops::routed_experts_backward(
        ctx,
        {.fwd = {.activation = act, .x = x, .idx = r.idx, .weights = weights, .w1 = w1, .w2 = w2},
         .dout = c,
         .dx = dx,
         .dweights = dweights,
         .dw1 = dw1,
         .dw2 = dw2});
    EXPECT_LE(rel_error(dx, gx), 1e-3);
    EXPECT_LE(rel_error(dweights, gw), 1e-3);
    EXPECT_LE(rel_error(dw1, g1), 1e-3);
    EXPECT_LE(rel_error(dw2, g2), 1e-3);
  }
}

}  // namespace
}  // namespace ssm

// relu_squared_backward and gelu_product_backward on every backend against
// ref inside wider rows, and ref's against centred differences of ref's own
// forward, element by element (the ops are pointwise, so perturbing every
// element at once gives each element's derivative).
#include <gtest/gtest.h>

#include <functional>

#include "ops/against_ref.h"
#include "ssm/ops/activation.h"

namespace ssm {
namespace {

using testing::in_block;
using testing::random_tensor;

class ActivationBackwardTest : public ::testing::TestWithParam<std::string> {};

const std::pair<int64_t, int64_t> kSizes[] = {{1, 1}, {7, 33}, {300, 128}};

TEST_P(ActivationBackwardTest, ReluSquaredMatchesRefInWiderRows) {
  for (const auto& [R, C] : kSizes) {
    const Tensor x = random_tensor({R, C}, R * 31 + C, -2.f, 2.f), d = random_tensor({R, C}, R + C);
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
      const auto b = in_block(ctx, d, true, 3, 2);
      ops::relu_squared_backward(ctx, testing::in_wider_rows(ctx, x, 1, 4), b.view);
      return testing::outputs({{"rows", b.rows}});
    });
  }
}

TEST_P(ActivationBackwardTest, GeluProductMatchesRefInWiderRows) {
  for (const auto& [R, C] : kSizes) {
    const Tensor g = random_tensor({R, C}, R * 17 + C, -4.f, 4.f);
    const Tensor x = random_tensor({R, C}, R * 29 + C, -2.f, 2.f), d = random_tensor({R, C}, R + C);
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
      const auto b = in_block(ctx, d, true, 3, 2);
      const auto dg = in_block(ctx, Tensor::zeros(DType::kF32, {R, C}), true, 2, 3);
      ops::gelu_product_backward(ctx, testing::in_wider_rows(ctx, g, 1, 4),
                                 testing::in_wider_rows(ctx, x, 4, 1), dg.view, b.view);
      return testing::outputs({{"d", b.rows}, {"dgate", dg.rows}});
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ActivationBackwardTest,
                         ::testing::ValuesIn(testing::all_backends()), testing::backend_param_name);

// (f(v + h) - f(v - h)) / 2h per element, f run by ref's forward on floats.
Tensor pointwise_fd(const Tensor& v, float h, const std::function<Tensor(const Tensor&)>& f) {
  Tensor up = v.clone(), down = v.clone();
  for (int64_t i = 0; i < v.numel(); ++i) up.data<float>()[i] += h, down.data<float>()[i] -= h;
  const Tensor fu = f(up), fd = f(down);
  Tensor g = Tensor::zeros(DType::kF32, v.shape());
  for (int64_t i = 0; i < v.numel(); ++i)
    g.data<float>()[i] =
        static_cast<float>((static_cast<double>(fu.data<float>()[i]) - fd.data<float>()[i]) /
                           (2.0 * (up.data<float>()[i] - v.data<float>()[i])));
  return g;
}

TEST(ActivationBackwardRef, MatchesFiniteDifferences) {
  Context ctx("ref", 1);
  const Tensor x = random_tensor({6, 50}, 5, -2.f, 2.f), g = random_tensor({6, 50}, 6, -4.f, 4.f);
  Tensor ones = Tensor::zeros(DType::kF32, {6, 50});
  for (int64_t i = 0; i < ones.numel(); ++i) ones.data<float>()[i] = 1.f;
  // h: truncation ~h^2 and relu²'s kink within h of 0 ~h/|f'|max, rounding
  // of float outputs ~1e-7 |f| / h: each near 1e-5 of the largest derivative.
  const float h = 1e-3f;
  // relu²: d/dx at d = 1.
  Tensor d = ones.clone();
  ops::relu_squared_backward(ctx, x, d);
  const Tensor fd_relu = pointwise_fd(x, h, [&](const Tensor& v) {
    Tensor t = v.clone();
    ops::relu_squared(ctx, t);
    return t;
  });
  EXPECT_LE(testing::max_rel_error(d, fd_relu), 2e-4);
  // GELU(g) * x: d/dgate and d/dx at d = 1.
  Tensor dgate = Tensor::zeros(DType::kF32, {6, 50}), dx = ones.clone();
  ops::gelu_product_backward(ctx, g, x, dgate, dx);
  const Tensor fd_gate = pointwise_fd(g, h, [&](const Tensor& v) {
    Tensor t = x.clone();
    ops::gelu_product(ctx, v, t);
    return t;
  });
  const Tensor fd_x = pointwise_fd(x, h, [&](const Tensor& v) {
    Tensor t = v.clone();
    ops::gelu_product(ctx, g, t);
    return t;
  });
  EXPECT_LE(testing::max_rel_error(dgate, fd_gate), 2e-4);
  EXPECT_LE(testing::max_rel_error(dx, fd_x), 2e-4);
}

}  // namespace
}  // namespace ssm

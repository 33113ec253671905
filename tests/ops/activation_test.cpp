// relu_squared and gelu_product on every backend against ref, in place
// inside wider rows (as a layer's column blocks), and against max(v, 0)^2
// and GELU(g) * v computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ops/against_ref.h"
#include "ssm/ops/activation.h"

namespace ssm {
namespace {

using testing::in_block;
using testing::random_tensor;

class ActivationTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ActivationTest, ReluSquaredMatchesRefInWiderRows) {
  for (const auto& [R, C] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {300, 128}}) {
    const Tensor x = random_tensor({R, C}, R * 31 + C, -2.f, 2.f);
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
      const auto b = in_block(ctx, x, true, 3, 2);
      ops::relu_squared(ctx, b.view);
      return testing::outputs({{"rows", b.rows}});  // the padding must be left as it was
    });
  }
}

TEST_P(ActivationTest, ReluSquaredIsTheSquareOfThePositivePart) {
  Context ctx(GetParam(), 2);
  const Tensor x = random_tensor({5, 40}, 9, -3.f, 3.f);
  const Tensor t = testing::on(ctx, x);
  ops::relu_squared(ctx, t);
  const Tensor h = testing::host(t);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float p = std::max(0.f, x.data<float>()[i]);
    EXPECT_EQ(h.data<float>()[i], p * p) << i;
  }
}

TEST_P(ActivationTest, GeluProductMatchesRefInWiderRows) {
  for (const auto& [R, C] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {300, 128}}) {
    const Tensor g = random_tensor({R, C}, R * 17 + C, -4.f, 4.f);
    const Tensor x = random_tensor({R, C}, R * 29 + C, -2.f, 2.f);
    testing::expect_matches_ref(GetParam(), [&](Context& ctx) -> testing::Outputs {
      const auto b = in_block(ctx, x, true, 3, 2);
      ops::gelu_product(ctx, testing::in_wider_rows(ctx, g, 1, 4), b.view);
      return testing::outputs({{"rows", b.rows}});  // the padding must be left as it was
    });
  }
}

TEST_P(ActivationTest, GeluProductIsTheExactGeluTimesTheOtherHalf) {
  Context ctx(GetParam(), 2);
  const Tensor g = random_tensor({5, 40}, 3, -5.f, 5.f);
  const Tensor x = random_tensor({5, 40}, 4, -2.f, 2.f);
  const Tensor t = testing::on(ctx, x);
  ops::gelu_product(ctx, testing::on(ctx, g), t);
  const Tensor h = testing::host(t);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = g.data<float>()[i];
    const double expected = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))) * x.data<float>()[i];
    EXPECT_NEAR(h.data<float>()[i], expected, 1e-6 * (1 + std::fabs(expected))) << i;
  }
}

TEST_P(ActivationTest, GeluProductRefusesMismatchedShapes) {
  Context ctx(GetParam(), 1);
  const Tensor g = testing::on(ctx, random_tensor({3, 8}, 1));
  const Tensor t = testing::on(ctx, random_tensor({3, 9}, 2));
  EXPECT_THROW(ops::gelu_product(ctx, g, t), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, ActivationTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm

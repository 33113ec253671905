// relu_squared on every backend against ref, in place inside wider rows (as
// a layer's column block), and against max(v, 0)^2 computed here.
#include <gtest/gtest.h>

#include <algorithm>

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

INSTANTIATE_TEST_SUITE_P(Backends, ActivationTest, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm

// add, fill, scale and sum_squares on every backend against ref, and ref
// against the formulas computed here: dense and column-block (strided)
// tensors, a single row, odd sizes, tensors large enough for the cpu kernels
// to use both threads, rows longer than the pieces they split rows into,
// alpha 1 and not; sum_squares equal to the bit for 1 and 2 threads.
#include "ssm/ops/elementwise.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <vector>

#include "op_test_support.h"

namespace ssm {
namespace {

using testing::Block;

struct Case {
  const char* name;
  Shape shape;
  int64_t offset, pad;  // the column block of a wider tensor (pad 0: dense)
};
const Case kCases[] = {
    {"dense", {3, 5}, 0, 0},           {"column_block", {2, 7, 13}, 2, 5},
    {"one_row", {1, 1000}, 0, 0},      {"vector", {37}, 0, 0},
    {"large_dense", {64, 1024}, 0, 0}, {"large_block", {2, 50, 700}, 100, 300},
    // Rows longer than the cpu kernels' pieces of 65536 (a parameter's
    // gradient, flattened): split within a row.
    {"long_vector", {3 * 65536 + 5}, 0, 0}, {"long_rows", {2, 65536 + 17}, 3, 9},
};

// dst + alpha src from the formula, rounded once from double.
Tensor added(const Tensor& dst, const Tensor& src, float alpha) {
  Tensor d = dst.clone();
  const Tensor s = src.clone();
  for (int64_t i = 0; i < d.numel(); ++i)
    d.data<float>()[i] = static_cast<float>(static_cast<double>(d.data<float>()[i]) +
                                            static_cast<double>(alpha) * s.data<float>()[i]);
  return d;
}

class Elementwise : public ::testing::TestWithParam<std::string> {};

TEST_P(Elementwise, AddMatchesRefAndTheFormula) {
  for (const Case& c : kCases)
    for (float alpha : {1.f, -0.37f}) {
      SCOPED_TRACE(::testing::Message() << c.name << ", alpha " << alpha);
      const Block dst = testing::random_block(c.shape, c.offset, c.pad, 1);
      const Block src =
          testing::random_block(c.shape, c.pad / 2, c.pad, 2);  // another stride offset
      auto run = [&](Context& ctx) {
        const Block d = on(ctx, dst);
        ops::add(ctx, d.view(), on(ctx, src).view(), alpha);
        return testing::host(d.wide);
      };
      Context ref("ref", 1);
      const Tensor want = run(ref);
      EXPECT_TRUE(testing::close(want.cols(c.offset, c.offset + c.shape.back()).clone(),
                                 added(dst.view(), src.view(), alpha), {0, 0}));
      for (int threads : {1, 2}) {
        Context ctx(GetParam(), threads);
        EXPECT_TRUE(testing::close(run(ctx), want)) << threads << " threads";
      }
    }
}

TEST_P(Elementwise, AddOfATensorToItselfDoublesIt) {
  Context ctx(GetParam(), 2);
  const Tensor t = testing::random_tensor({64, 1024}, 3), want = t.clone();
  const Tensor d = testing::on(ctx, t);
  ops::add(ctx, d, d);
  EXPECT_TRUE(testing::close(d, added(want, want, 1.f), {0, 0}));
}

TEST_P(Elementwise, ScaleMatchesRef) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Block t = testing::random_block(c.shape, c.offset, c.pad, 4);
    auto run = [&](Context& ctx) {
      const Block d = on(ctx, t);
      ops::scale(ctx, d.view(), -2.75f);
      return testing::host(d.wide);
    };
    Context ref("ref", 1);
    const Tensor want = run(ref);
    const Tensor before = t.view().clone();
    const Tensor after = want.cols(c.offset, c.offset + c.shape.back()).clone();
    for (int64_t i = 0; i < before.numel(); ++i)
      ASSERT_EQ(after.data<float>()[i], before.data<float>()[i] * -2.75f);
    for (int threads : {1, 2}) {
      Context ctx(GetParam(), threads);
      EXPECT_TRUE(testing::identical(run(ctx), want)) << threads << " threads";
    }
  }
}

TEST_P(Elementwise, FillSetsTheViewOnly) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Block t = testing::random_block(c.shape, c.offset, c.pad, 5);
    for (float value : {0.f, 3.5f}) {
      auto run = [&](Context& ctx) {
        const Block d = on(ctx, t);
        ops::fill(ctx, d.view(), value);
        return testing::host(d.wide);
      };
      Context ref("ref", 1);
      const Tensor want = run(ref);
      const Tensor inside = want.cols(c.offset, c.offset + c.shape.back()).clone();
      for (int64_t i = 0; i < inside.numel(); ++i) ASSERT_EQ(inside.data<float>()[i], value);
      // The columns around the block keep their values.
      const int64_t end = c.offset + c.shape.back(), wide = c.shape.back() + c.pad;
      EXPECT_TRUE(
          testing::identical(want.cols(0, c.offset).clone(), t.wide.cols(0, c.offset).clone()));
      EXPECT_TRUE(testing::identical(want.cols(end, wide).clone(), t.wide.cols(end, wide).clone()));
      for (int threads : {1, 2}) {
        Context ctx(GetParam(), threads);
        EXPECT_TRUE(testing::identical(run(ctx), want)) << threads << " threads";
      }
    }
  }
}

TEST_P(Elementwise, FillZeroesDenseTensorsOfAnyDtype) {
  Context ctx(GetParam(), 2);
  for (DType dtype : {DType::kI64, DType::kF64, DType::kI32, DType::kF32}) {
    Tensor typed = Tensor::empty(dtype, {3, 4, 5});
    std::memset(typed.raw(), 0x5a, typed.nbytes());
    const Tensor d = testing::on(ctx, typed);
    ops::fill(ctx, d, 0.f);
    EXPECT_TRUE(testing::identical(d, Tensor::zeros(dtype, {3, 4, 5}))) << dtype_name(dtype);
  }
}

TEST_P(Elementwise, SumSquaresMatchesRefAndIsThreadIndependent) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Block t = testing::random_block(c.shape, c.offset, c.pad, 7);
    const Tensor dense = t.view().clone();
    double want = 0;
    for (int64_t i = 0; i < dense.numel(); ++i)
      want += static_cast<double>(dense.data<float>()[i]) * dense.data<float>()[i];
    Context ref("ref", 1);
    EXPECT_NEAR(ops::sum_squares(ref, t.view()), want, 1e-12 * want);
    Context one(GetParam(), 1), two(GetParam(), 2);
    const double got = ops::sum_squares(one, on(one, t).view());
    EXPECT_NEAR(got, want, 1e-12 * want);
    EXPECT_EQ(ops::sum_squares(two, on(two, t).view()), got);
  }
}

// The sum kept on the device (training's gradient norm) is the returned one,
// also over a million elements (where the cuda kernel sums in many blocks).
TEST_P(Elementwise, SumSquaresToStoresTheSameSum) {
  std::vector<Case> cases(std::begin(kCases), std::end(kCases));
  cases.push_back({"over_a_million", {1100, 1024}, 0, 0});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Block t = testing::random_block(c.shape, c.offset, c.pad, 7);
    Context ctx(GetParam(), 2);
    const Block d = on(ctx, t);
    const Tensor out = testing::on(ctx, Tensor::zeros(DType::kF64, {1}));
    ops::sum_squares_to(ctx, d.view(), out);
    EXPECT_EQ(testing::host(out).data<double>()[0], ops::sum_squares(ctx, d.view()));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Elementwise, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ssm

// Tensors as views: strides, rows, column blocks, reshapes and copies, the
// low-precision formats, shapes held inline, devices without memory.
#include "ssm/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/random.h"

namespace ssm {
namespace {

float at(const Tensor& t, int64_t i, int64_t j) {
  return t.data<float>()[i * t.stride(0) + j * t.stride(1)];
}

TEST(Tensor, DefaultIsUndefinedAndEmptyIsDefined) {
  EXPECT_FALSE(Tensor().defined());
  EXPECT_TRUE(Tensor::empty(DType::kF32, {0, 3}).defined());
}

TEST(Tensor, ColumnBlocksAreStridedViewsWithRows) {
  const Tensor m = testing::random_tensor({4, 10}, 1);
  const Tensor c = m.cols(3, 7);
  EXPECT_EQ(c.shape(), (Shape{4, 4}));
  EXPECT_FALSE(c.is_dense());
  EXPECT_TRUE(c.has_rows());
  EXPECT_EQ(c.row_stride(), 10);
  EXPECT_EQ(c.raw(), m.data<float>() + 3);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(at(c, i, j), at(m, i, j + 3));
}

TEST(Tensor, ABatchOfColumnBlocksFoldsIntoRowsButATimeSliceDoesNot) {
  const Tensor x = testing::random_tensor({3, 5, 8}, 2);
  const Tensor block = x.cols(2, 6);  // (3, 5, 4), rows of stride 8
  EXPECT_TRUE(block.has_rows());
  EXPECT_EQ(block.rows(), 15);
  EXPECT_EQ(block.row_stride(), 8);
  const Tensor time = x.slice(1, 1, 3);  // (3, 2, 8): batch rows 40 apart
  EXPECT_FALSE(time.has_rows());
  EXPECT_TRUE(x.slice(1, 1, 3).index(0).has_rows());
}

TEST(Tensor, ReshapeKeepsTheRowStrideOfAStridedView) {
  const Tensor x = testing::random_tensor({6, 9}, 3);
  const Tensor r = x.cols(1, 5).reshape({2, 3, 4});
  EXPECT_EQ(r.stride(0), 27);
  EXPECT_EQ(r.stride(1), 9);
  EXPECT_EQ(r.data<float>()[1 * 27 + 2 * 9 + 3], at(x, 5, 4));
  EXPECT_THROW(x.cols(1, 5).reshape({4, 6}), std::exception);  // would need a copy
}

TEST(Tensor, CloneOfAnyViewIsDenseAndEqual) {
  const Tensor x = testing::random_tensor({3, 5, 8}, 4);
  for (const Tensor& v : {x.cols(2, 6), x.slice(1, 1, 4), x.slice(0, 1, 3).cols(0, 1)}) {
    const Tensor c = v.clone();
    ASSERT_TRUE(c.is_dense());
    ASSERT_EQ(c.shape(), v.shape());
    int64_t k = 0;
    for (int64_t i = 0; i < v.dim(0); ++i)
      for (int64_t j = 0; j < v.dim(1); ++j)
        for (int64_t l = 0; l < v.dim(2); ++l, ++k)
          EXPECT_EQ(c.data<float>()[k],
                    v.data<float>()[i * v.stride(0) + j * v.stride(1) + l * v.stride(2)]);
  }
}

TEST(Tensor, IndexDropsTheFirstDimension) {
  const Tensor x = testing::random_tensor({3, 4, 2}, 5);
  const Tensor r = x.index(2);
  EXPECT_EQ(r.shape(), (Shape{4, 2}));
  EXPECT_EQ(r.raw(), x.data<float>() + 16);
}

TEST(Tensor, LowPrecisionRoundTrips) {
  const Tensor x = testing::random_tensor({5, 33}, 6, -3.f, 3.f);
  const Tensor h = x.to_dtype(DType::kF16).to_f32(), b = x.to_dtype(DType::kBF16).to_f32();
  const Tensor q8 = x.to_dtype(DType::kQ8);
  ASSERT_EQ(q8.scales().shape(), (Shape{5}));
  const Tensor q = q8.to_f32();
  for (int64_t r = 0; r < 5; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < 33; ++c) amax = std::max(amax, std::fabs(at(x, r, c)));
    EXPECT_FLOAT_EQ(q8.scales().data<float>()[r], amax / 127.f);
    for (int64_t c = 0; c < 33; ++c) {
      const float v = at(x, r, c);
      EXPECT_LE(std::fabs(at(h, r, c) - v), std::fabs(v) * 1e-3f + 1e-6f);
      EXPECT_LE(std::fabs(at(b, r, c) - v), std::fabs(v) * 8e-3f);
      EXPECT_LE(std::fabs(at(q, r, c) - v), amax / 127.f * 0.5f + 1e-6f);
    }
  }
  // Rows of a Q8 view keep their own scales.
  EXPECT_EQ(q8.rows(2, 4).scales().data<float>(), q8.scales().data<float>() + 2);
}

TEST(Shape, HoldsAtMostEightDimensionsAndSaysSo) {
  Shape s;
  for (int i = 0; i < Shape::kMaxDims; ++i) s.push_back(1);
  EXPECT_THROW(s.push_back(1), Error);
  EXPECT_THROW(shape_numel({int64_t{1} << 40, int64_t{1} << 40}), Error);
  EXPECT_THROW(shape_numel({2, -1}), Error);
  EXPECT_EQ(shape_str({2, 3}), "[2, 3]");
}

TEST(Device, ATensorOnADeviceWithoutMemoryFunctionsIsAClearError) {
  try {
    Tensor::empty(DType::kF32, {4}, Device::cuda(1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ssm

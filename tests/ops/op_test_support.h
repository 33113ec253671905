// What the op tests of attention, embedding, elementwise, loss and optimizer
// share: the strided layouts layers pass (column blocks of a wider tensor),
// bitwise comparison for thread-count independence, and float64 finite
// differences for checking ref's backwards against ref's forwards.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "ssm/tensor/tensor.h"
#include "ops/finite_differences.h"
#include "support/backends.h"
#include "support/random.h"

namespace ssm::testing {

// A column block [offset, offset + cols) of a wider tensor: a view with rows
// whose row stride exceeds its width, as a block of a projection's output.
// Kept as (wide, offset, cols) so that the same view can be made again on a
// backend's device (on() alone would make a dense copy).
struct Block {
  Tensor wide;
  int64_t offset = 0, cols = 0;
  Tensor view() const { return wide.cols(offset, offset + cols); }
};
inline Block dense_block(const Tensor& t) { return {t, 0, t.dim(-1)}; }
// Random, with `shape`'s last dimension widened by pad (0: dense).
inline Block random_block(Shape shape, int64_t offset, int64_t pad, uint64_t seed) {
  const int64_t cols = shape.back();
  shape.back() += pad;
  return {random_tensor(shape, seed), offset, cols};
}
// A copy of the whole wide tensor on ctx's device, the same view of it.
inline Block on(Context& ctx, const Block& b) { return {on(ctx, b.wide), b.offset, b.cols}; }

inline Tensor i64_tensor(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty(DType::kI64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// Same dtype, shape and bytes (on the host, dense copies compared).
inline ::testing::AssertionResult identical(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::host()), y = b.to(Device::host());
  if (!x.same_layout(y)) return ::testing::AssertionFailure() << "layouts differ";
  if (std::memcmp(x.raw(), y.raw(), x.nbytes()) != 0)
    return ::testing::AssertionFailure() << "bytes differ";
  return ::testing::AssertionSuccess();
}

inline Tensor to_f64(const Tensor& t) { return t.to_dtype(DType::kF64); }

// max |got - want| <= rel max |want| (+ abs), in double.
inline ::testing::AssertionResult close64(const Tensor& got, const Tensor& want, double rel,
                                          double abs = 0) {
  const Tensor a = got.to_dtype(DType::kF64), b = want.to_dtype(DType::kF64);
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shape " << a.shape() << " vs " << b.shape();
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::abs(a.data<double>()[i] - b.data<double>()[i]);
    if (!(d <= diff)) diff = d;
    scale = std::max(scale, std::abs(b.data<double>()[i]));
  }
  if (diff <= abs || diff <= rel * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max |got - want| = " << diff << ", max |want| = " << scale << ", relative "
         << diff / scale << " > " << rel;
}

}  // namespace ssm::testing

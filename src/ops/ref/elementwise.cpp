// Whole-tensor moves and sums, element by element: rows for the arithmetic,
// every index of every dimension for the strided copy.
#include <array>
#include <cstring>

#include "ops/ref/kernels.h"
#include "ops/tensor_data.h"

namespace ssm::ref {
namespace {

void add(Context&, const Tensor& dst, const Tensor& src, float alpha) {
  for (int64_t r = 0; r < dst.rows(); ++r)
    for (int64_t c = 0; c < dst.cols(); ++c)
      ops::row<float>(dst, r)[c] = static_cast<float>(
          static_cast<double>(ops::row<float>(dst, r)[c]) +
          static_cast<double>(alpha) * static_cast<double>(ops::row<float>(src, r)[c]));
}

// Element (i_0, ..., i_n-1) sits at sum_d i_d stride_d of either tensor.
void copy(Context&, const Tensor& dst, const Tensor& src) {
  const int n = dst.ndim();
  const size_t size = dtype_size(dst.dtype());
  char* to = static_cast<char*>(const_cast<void*>(dst.raw()));
  const char* from = static_cast<const char*>(src.raw());
  std::array<int64_t, Shape::kMaxDims> index{};
  for (int64_t i = 0; i < dst.numel(); ++i) {
    int64_t at_dst = 0, at_src = 0;
    for (int d = 0; d < n; ++d) {
      at_dst += index[d] * dst.stride(d);
      at_src += index[d] * src.stride(d);
    }
    std::memcpy(to + at_dst * static_cast<int64_t>(size),
                from + at_src * static_cast<int64_t>(size), size);
    for (int d = n - 1; d >= 0 && ++index[d] == dst.dim(d); --d) index[d] = 0;
  }
}

void fill(Context&, const Tensor& dst, float value) {
  if (value == 0.f && dst.is_dense()) {  // any dtype: zero bytes are zero
    std::memset(const_cast<void*>(dst.raw()), 0, dst.nbytes());
    return;
  }
  for (int64_t r = 0; r < dst.rows(); ++r)
    for (int64_t c = 0; c < dst.cols(); ++c) ops::row<float>(dst, r)[c] = value;
}

void scale(Context&, const Tensor& t, float alpha) {
  for (int64_t r = 0; r < t.rows(); ++r)
    for (int64_t c = 0; c < t.cols(); ++c) ops::row<float>(t, r)[c] *= alpha;
}

double sum_squares(Context&, const Tensor& t) {
  double s = 0;
  for (int64_t r = 0; r < t.rows(); ++r)
    for (int64_t c = 0; c < t.cols(); ++c) {
      const double x = ops::row<float>(t, r)[c];
      s += x * x;
    }
  return s;
}

}  // namespace

void add_elementwise_kernels(OpTable& t) {
  t.add = &add;
  t.copy = &copy;
  t.fill = &fill;
  t.scale = &scale;
  t.sum_squares = &sum_squares;
}

}  // namespace ssm::ref

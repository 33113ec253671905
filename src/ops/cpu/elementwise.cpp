// Whole-tensor arithmetic parallel over rows once a tensor is large enough
// to pay for the threads; the strided copy as a few long memcpy runs.
#include <algorithm>
#include <cstring>

#include "ops/cpu/copy.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {

namespace {

void add(Context& ctx, const Tensor& dst, const Tensor& src, float alpha) {
  const ops::Rows<float> d(dst);
  const ops::Rows<const float> s(src);
  const int64_t cols = dst.cols();
  parallel_items(ctx.pool(), dst.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* to = d[r];
      const float* from = s[r];
      for (int64_t c = 0; c < cols; ++c) to[c] += alpha * from[c];
    }
  });
}

void fill(Context& ctx, const Tensor& dst, float value) {
  if (value == 0.f && dst.is_dense()) {  // any dtype: zero bytes are zero
    std::memset(const_cast<void*>(dst.raw()), 0, dst.nbytes());
    return;
  }
  const ops::Rows<float> d(dst);
  const int64_t cols = dst.cols();
  parallel_items(ctx.pool(), dst.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) std::fill(d[r], d[r] + cols, value);
  });
}

void scale(Context& ctx, const Tensor& t, float alpha) {
  const ops::Rows<float> d(t);
  const int64_t cols = t.cols();
  parallel_items(ctx.pool(), t.rows(), cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) d[r][c] *= alpha;
  });
}

// Each row's sum in double, then the rows' sums in row order: the same
// result for any thread count.
double sum_squares(Context& ctx, const Tensor& t) {
  const ops::Rows<const float> d(t);
  const int64_t rows = t.rows(), cols = t.cols();
  double* row_sums = ctx.arena().alloc(DType::kF64, {rows}).data<double>();
  parallel_items(ctx.pool(), rows, cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(d[r][c]) * d[r][c];
      row_sums[r] = s;
    }
  });
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) total += row_sums[r];
  return total;
}

}  // namespace

void add_elementwise_kernels(OpTable& t) {
  t.add = &add;
  t.copy = &copy;
  t.fill = &fill;
  t.scale = &scale;
  t.sum_squares = &sum_squares;
}

}  // namespace ssm::cpu

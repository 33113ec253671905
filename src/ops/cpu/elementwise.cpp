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

// Long rows are split into pieces of kPiece elements, each a task of the
// pool: a parameter's gradient is one row of up to 39M floats (the head's),
// which as one task ran on the calling thread while the other waited. The
// pieces are fixed, so no result depends on the thread count.
constexpr int64_t kPiece = int64_t{1} << 16;

// fn(r, c0, c1) for every piece [c0, c1) of every row r < rows, in parallel
// once there are elements enough.
template <typename Fn>
void for_each_piece(ThreadPool& pool, int64_t rows, int64_t cols, Fn&& fn) {
  const int64_t per_row = std::max<int64_t>(1, (cols + kPiece - 1) / kPiece);
  parallel_items(pool, rows * per_row, std::min(cols, kPiece), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t r = i / per_row, c0 = i % per_row * kPiece;
      fn(r, c0, std::min(cols, c0 + kPiece));
    }
  });
}

// The sum of x[i]^2 over i < n in double, in eight interleaved lanes (eight
// independent chains of additions, which vectorise; one chain waited on the
// adder's latency per element), the lanes then summed pairwise in a fixed
// order and the remainder after them.
double piece_sum_squares(const float* x, int64_t n) {
  double lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += static_cast<double>(x[i + j]) * x[i + j];
  double s =
      ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void add(Context& ctx, const Tensor& dst, const Tensor& src, float alpha) {
  const ops::Rows<float> d(dst);
  const ops::Rows<const float> s(src);
  for_each_piece(ctx.pool(), dst.rows(), dst.cols(), [&](int64_t r, int64_t c0, int64_t c1) {
    float* to = d[r];
    const float* from = s[r];
    for (int64_t c = c0; c < c1; ++c) to[c] += alpha * from[c];
  });
}

void fill(Context& ctx, const Tensor& dst, float value) {
  if (value == 0.f && dst.is_dense()) {  // any dtype: zero bytes are zero
    auto* bytes = static_cast<char*>(const_cast<void*>(dst.raw()));
    const auto n = static_cast<int64_t>(dst.nbytes());
    for_each_piece(ctx.pool(), 1, n, [&](int64_t, int64_t c0, int64_t c1) {
      std::memset(bytes + c0, 0, static_cast<size_t>(c1 - c0));
    });
    return;
  }
  const ops::Rows<float> d(dst);
  for_each_piece(ctx.pool(), dst.rows(), dst.cols(), [&](int64_t r, int64_t c0, int64_t c1) {
    std::fill(d[r] + c0, d[r] + c1, value);
  });
}

void scale(Context& ctx, const Tensor& t, float alpha) {
  const ops::Rows<float> d(t);
  for_each_piece(ctx.pool(), t.rows(), t.cols(), [&](int64_t r, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) d[r][c] *= alpha;
  });
}

// Each piece's sum in double, then the pieces' sums in order (row by row):
// the same result for any thread count.
double sum_squares(Context& ctx, const Tensor& t) {
  const ops::Rows<const float> d(t);
  const int64_t rows = t.rows(), cols = t.cols();
  const int64_t per_row = std::max<int64_t>(1, (cols + kPiece - 1) / kPiece);
  Arena::Scope scope(ctx.arena());
  double* piece_sums = ctx.arena().alloc(DType::kF64, {rows * per_row}).data<double>();
  for_each_piece(ctx.pool(), rows, cols, [&](int64_t r, int64_t c0, int64_t c1) {
    piece_sums[r * per_row + c0 / kPiece] = piece_sum_squares(d[r] + c0, c1 - c0);
  });
  double total = 0;
  for (int64_t i = 0; i < rows * per_row; ++i) total += piece_sums[i];
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

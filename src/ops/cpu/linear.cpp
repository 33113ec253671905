// y = x W^T (+ bias) through OpenBLAS, split over the pool, and its backward.
// Only F32 weights so far: F16, BF16 and Q8 are refused by name (their fast
// kernels are a later issue) rather than widened silently per call.
#include <algorithm>
#include <cstring>

#include "ops/cpu/blas.h"
#include "ops/cpu/kernels.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

using ops::elements;
using ops::elements_or_null;

// linear() with at most this many rows takes the matrix-vector path; a block
// of W of about kGemvBlockBytes is reused from L2 for every row.
constexpr int64_t kGemvMaxRows = 8;
constexpr int64_t kGemvBlockBytes = 256 << 10;

// out[0, n) = bias (+ out when accumulating), ready for a product with beta 1;
// returns that beta (0 when out starts from nothing).
float start_output(float* out, const float* bias, int64_t n, bool accumulate) {
  if (!bias) return accumulate ? 1.f : 0.f;
  if (accumulate)
    for (int64_t j = 0; j < n; ++j) out[j] += bias[j];
  else
    std::memcpy(out, bias, static_cast<size_t>(n) * sizeof(float));
  return 1.f;
}

void linear(Context& ctx, const ops::LinearArgs& a) {
  if (a.W.dtype() != DType::kF32)
    throw Error(cat("op 'linear': backend 'cpu' has no kernel for ", dtype_name(a.W.dtype()),
                    " weights yet (convert them to F32 or use backend 'ref')"));
  const int64_t M = a.x.rows(), K = a.x.cols(), N = a.W.dim(0);
  const int64_t ldx = a.x.row_stride(), ldy = a.y.row_stride();
  const float* x = a.x.data<float>();
  const float* W = a.W.data<float>();
  const float* bias = elements_or_null<float>(a.bias);
  float* y = elements<float>(a.y);
  ThreadPool& pool = ctx.pool();
  if (M <= kGemvMaxRows) {
    // Decoding: a few rows against a large W. sgemm would repack all of W
    // per call (its cost at M = 1 is mostly that copy); matrix-vector
    // products over blocks of W that stay in L2 read it from memory once.
    // Each output is one sgemv over all of K whatever the split, so results
    // do not depend on the thread count or on the other rows of the batch.
    const int64_t bn = std::max<int64_t>(
        16, std::min<int64_t>(256, (kGemvBlockBytes / 4) / std::max<int64_t>(K, 1)));
    pool.parallel_for((N + bn - 1) / bn, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t n0 = blk * bn, n = std::min(N, n0 + bn) - n0;
        for (int64_t m = 0; m < M; ++m) {
          float* out = y + m * ldy + n0;
          const float beta = start_output(out, bias ? bias + n0 : nullptr, n, a.accumulate);
          gemv(n, K, 1.f, W + n0 * K, K, x + m * ldx, beta, out);
        }
      }
    });
    return;
  }
  auto block = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    float beta = a.accumulate ? 1.f : 0.f;
    for (int64_t i = m0; i < m1; ++i)
      beta = start_output(y + i * ldy + n0, bias ? bias + n0 : nullptr, n1 - n0, a.accumulate);
    gemm(false, true, m1 - m0, n1 - n0, K, 1.f, x + m0 * ldx, ldx, W + n0 * K, K, beta,
         y + m0 * ldy + n0, ldy);
  };
  const int64_t threads = pool.size();
  if (M >= 4 * threads || N < 64 * threads) {
    // Row blocks of 16 keep each BLAS call efficient and the split fair.
    pool.parallel_for((M + 15) / 16,
                      [&](int64_t b0, int64_t b1) { block(b0 * 16, std::min(M, b1 * 16), 0, N); });
  } else {
    pool.parallel_for((N + 63) / 64,
                      [&](int64_t b0, int64_t b1) { block(0, M, b0 * 64, std::min(N, b1 * 64)); });
  }
}

// dx = dy W, dW += dy^T x, dbias += column sums of dy, split over the pool
// by fixed blocks (rows of dx, rows of dW). Every element is one BLAS sum
// over all of N (dx) or M (dW) whatever the split, and dbias sums rows in
// order, so no result depends on the thread count.
void linear_backward(Context& ctx, const ops::LinearBackwardArgs& a) {
  const int64_t M = a.x.rows(), K = a.x.cols(), N = a.W.dim(0);
  if (M == 0) return;
  const int64_t ldx = a.x.row_stride(), lddy = a.dy.row_stride();
  const float* x = a.x.data<float>();
  const float* W = a.W.data<float>();
  const float* dy = a.dy.data<float>();
  float* dx = elements_or_null<float>(a.dx);
  float* dW = elements_or_null<float>(a.dW);
  float* dbias = elements_or_null<float>(a.dbias);
  ThreadPool& pool = ctx.pool();
  if (dx) {
    constexpr int64_t kRows = 16;
    const int64_t lddx = a.dx.row_stride();
    pool.parallel_for((M + kRows - 1) / kRows, [&](int64_t b0, int64_t b1) {
      const int64_t m0 = b0 * kRows, m1 = std::min(M, b1 * kRows);
      gemm(false, false, m1 - m0, K, N, 1.f, dy + m0 * lddy, lddy, W, K,
           a.accumulate_dx ? 1.f : 0.f, dx + m0 * lddx, lddx);
    });
  }
  if (dW || dbias) {
    // Each block of output features sums over all M rows in one BLAS call.
    constexpr int64_t kCols = 32;
    pool.parallel_for((N + kCols - 1) / kCols, [&](int64_t b0, int64_t b1) {
      const int64_t n0 = b0 * kCols, n1 = std::min(N, b1 * kCols);
      if (dW) gemm(true, false, n1 - n0, K, M, 1.f, dy + n0, lddy, x, ldx, 1.f, dW + n0 * K, K);
      if (dbias)
        for (int64_t n = n0; n < n1; ++n) {
          double s = 0;
          for (int64_t m = 0; m < M; ++m) s += dy[m * lddy + n];
          dbias[n] += static_cast<float>(s);
        }
    });
  }
}

}  // namespace

void add_linear_kernels(OpTable& t) {
  t.linear = &linear;
  t.linear_backward = &linear_backward;
}

}  // namespace ssm::cpu

// y = x W^T (+ bias) through OpenBLAS, split over the pool, and its backward.
// F16, BF16 and Q8 weights take the kernels of lowp_linear.h: matrix-vector
// products that widen weights in registers (decode), and for longer inputs
// blocks of weight rows widened to F32 once per call and multiplied by sgemm.
// The backward takes F32 weights only (ops/linear.cpp checks).
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/lowp_linear.h"
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

// Weight rows per task of the low-precision paths: a multiple of 16 floats,
// so two threads never write one cache line of an output row.
constexpr int64_t kLowpGemvRows = 64;
constexpr int64_t kLowpGemmRows = 128;

LowpWeights lowp_rows(const Tensor& W, int64_t n0) {
  LowpWeights w{.dtype = W.dtype(), .data = nullptr, .K = W.dim(1)};
  w.data = static_cast<const char*>(W.raw()) + static_cast<size_t>(n0 * w.K) * dtype_size(W.dtype());
  if (W.dtype() == DType::kQ8) {
    const Tensor& s = W.scales();
    w.scale_stride = s.stride(0);
    w.scales = s.data<float>() + n0 * w.scale_stride;
  }
  return w;
}

void linear_lowp(Context& ctx, const ops::LinearArgs& a) {
  const DType t = a.W.dtype();
  if (t != DType::kF16 && t != DType::kBF16 && t != DType::kQ8)
    throw Error(cat("op 'linear': backend 'cpu' has no kernel for ", dtype_name(t), " weights"));
  const int64_t M = a.x.rows(), K = a.x.cols(), N = a.W.dim(0);
  const int64_t ldx = a.x.row_stride(), ldy = a.y.row_stride();
  const float* x = a.x.data<float>();
  const float* bias = elements_or_null<float>(a.bias);
  float* y = elements<float>(a.y);
  if (M <= kGemvMaxRows) {
    ctx.pool().parallel_for((N + kLowpGemvRows - 1) / kLowpGemvRows, [&](int64_t b0, int64_t b1) {
      const int64_t n0 = b0 * kLowpGemvRows, n1 = std::min(N, b1 * kLowpGemvRows);
      lowp_gemv({.W = lowp_rows(a.W, n0), .n = n1 - n0, .x = x, .ldx = ldx, .M = M,
                 .bias = bias ? bias + n0 : nullptr, .accumulate = a.accumulate,
                 .y = y + n0, .ldy = ldy});
    });
    return;
  }
  // Prefill: each task widens its block of weight rows once into a buffer of
  // its thread (kept between calls: nothing is allocated after the first)
  // and multiplies all M rows with it.
  ctx.pool().parallel_for((N + kLowpGemmRows - 1) / kLowpGemmRows, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> widened;
    widened.resize(static_cast<size_t>(kLowpGemmRows * K));
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t n0 = blk * kLowpGemmRows, n = std::min(N, n0 + kLowpGemmRows) - n0;
      lowp_widen_rows(lowp_rows(a.W, n0), n, widened.data());
      float beta = a.accumulate ? 1.f : 0.f;
      for (int64_t i = 0; i < M; ++i)
        beta = start_output(y + i * ldy + n0, bias ? bias + n0 : nullptr, n, a.accumulate);
      gemm(false, true, M, n, K, 1.f, x, ldx, widened.data(), K, beta, y + n0, ldy);
    }
  });
}

void linear(Context& ctx, const ops::LinearArgs& a) {
  if (a.W.dtype() != DType::kF32) return linear_lowp(ctx, a);
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

// y = x W^T (+ bias) through OpenBLAS, split over the pool, and its backward.
// F16, BF16 and Q8 weights take the kernels of lowp_linear.h: matrix-vector
// products that widen weights in registers (decode), and for longer inputs
// blocks of weight rows widened to F32 once per call and multiplied by sgemm.
// Where the CPU has them, decoding takes VNNI byte products (Q8) and BF16
// dot products (BF16) instead (x86_kernels.h), and prefill BF16 products.
// The backward takes F32 weights only (ops/linear.cpp checks).
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/lowp_linear.h"
#include "ops/cpu/transposed_products.h"
#include "ops/cpu/x86_kernels.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

using ops::elements;
using ops::elements_or_null;

// linear() with at most this many rows takes the matrix-vector path.
constexpr int64_t kGemvMaxRows = 8;
// The largest tile of outputs per sgemm call of the F32 path above it.
constexpr int64_t kGemmRows = 256;
constexpr int64_t kGemmCols = 512;

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
// The BF16 product's tasks: a multiple of its tile's 6 rows and of 16.
constexpr int64_t kBf16GemmRows = 96;

LowpWeights lowp_rows(const Tensor& W, int64_t n0) {
  LowpWeights w{.dtype = W.dtype(), .data = nullptr, .K = W.dim(1)};
  w.data =
      static_cast<const char*>(W.raw()) + static_cast<size_t>(n0 * w.K) * dtype_size(W.dtype());
  if (W.dtype() == DType::kQ8) {
    const Tensor& s = W.scales();
    w.scale_stride = s.stride(0);
    w.scales = s.data<float>() + n0 * w.scale_stride;
  }
  return w;
}

// Decoding's matrix-vector loops: rows(n0, n1) for each block of
// kLowpGemvRows weight rows of N, blocks claimed as the threads come free
// (each output's sum does not depend on the split).
template <typename Rows>
void for_each_gemv_block(ThreadPool& pool, int64_t N, Rows&& rows) {
  pool.parallel_for_dynamic((N + kLowpGemvRows - 1) / kLowpGemvRows, [&](int64_t b0, int64_t b1) {
    rows(b0 * kLowpGemvRows, std::min(N, b1 * kLowpGemvRows));
  });
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
  if (M <= kGemvMaxRows && t == DType::kQ8 && cpu_has_avx512_vnni()) {
    // The activations quantised once per call (arena workspace: nothing is
    // allocated once a call of this size has run), then VNNI byte products.
    const Tensor work = ctx.arena().alloc(DType::kF32, {(q8_workspace_bytes(M, K) + 3) / 4});
    const Q8Activations xq = quantize_q8_rows(x, ldx, M, K, elements<float>(work));
    for_each_gemv_block(ctx.pool(), N, [&](int64_t n0, int64_t n1) {
      const LowpWeights w = lowp_rows(a.W, n0);
      q8_gemv_vnni(xq, {.W = static_cast<const int8_t*>(w.data),
                        .K = K,
                        .wscale = w.scales,
                        .wscale_stride = w.scale_stride,
                        .n = n1 - n0,
                        .bias = bias ? bias + n0 : nullptr,
                        .accumulate = a.accumulate,
                        .y = y + n0,
                        .ldy = ldy});
    });
    return;
  }
  if (M <= kGemvMaxRows && t == DType::kBF16 && cpu_bf16_dot_products_fast()) {
    // The activations rounded to BF16 once per call (arena workspace), then
    // BF16 dot products: half the arithmetic of widening the weights to F32,
    // which bounded batched decoding. Where vdpbf16ps is slow (the Intel
    // host of 2026-12-07) one row streams the weights faster widened (48-49
    // against 42-45 tokens/s, one thread) and 8 rows 5-10% slower; every
    // row count takes the same path, so that a row's result does not
    // depend on the rows beside it (LinearBatchRows).
    const Tensor work = ctx.arena().alloc(DType::kF32, {(bf16_gemv_workspace_bytes(M, K) + 3) / 4});
    const Bf16GemvRows xb = round_bf16_rows(x, ldx, M, K, elements<float>(work));
    const auto* W = static_cast<const uint16_t*>(a.W.raw());
    for_each_gemv_block(ctx.pool(), N, [&](int64_t n0, int64_t n1) {
      bf16_gemv_avx512(xb, {.W = W + n0 * K,
                            .K = K,
                            .n = n1 - n0,
                            .bias = bias ? bias + n0 : nullptr,
                            .accumulate = a.accumulate,
                            .y = y + n0,
                            .ldy = ldy});
    });
    return;
  }
  if (M <= kGemvMaxRows) {
    // Split statically, unlike the int8 and F32 paths: the BF16 kernel
    // deinterleaves x into a buffer of its thread once per call, which a
    // dynamic split would repeat per claim, and a thread could meet a larger
    // x after warm-up than it had (an allocation in decoding).
    const int64_t blocks = (N + kLowpGemvRows - 1) / kLowpGemvRows;
    ctx.pool().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
      const int64_t n0 = b0 * kLowpGemvRows, n1 = std::min(N, b1 * kLowpGemvRows);
      lowp_gemv({.W = lowp_rows(a.W, n0),
                 .n = n1 - n0,
                 .x = x,
                 .ldx = ldx,
                 .M = M,
                 .bias = bias ? bias + n0 : nullptr,
                 .accumulate = a.accumulate,
                 .y = y + n0,
                 .ldy = ldy});
    });
    return;
  }
  if (t == DType::kBF16 && cpu_bf16_dot_products_fast()) {
    // Prefill with BF16 dot products: the activations rounded to BF16 and
    // packed once per call (in parallel, arena workspace), the weights read
    // as stored.
    const Tensor work = ctx.arena().alloc(DType::kF32, {(bf16_pack_bytes(M, K) + 3) / 4});
    void* packed = elements<float>(work);
    const int64_t blocks = bf16_row_blocks(M);
    ctx.pool().parallel_for(
        blocks, [&](int64_t b0, int64_t b1) { pack_bf16_rows(x, ldx, M, K, packed, b0, b1); });
    const Bf16PackedRows xp = pack_bf16_rows(x, ldx, M, K, packed, 0, 0);
    const auto* W = static_cast<const uint16_t*>(a.W.raw());
    // Claimed dynamically, as the F32 kernel's blocks are: a static split
    // gave one thread 18 of in_proj's 35 blocks (130m) and the other 16 and
    // a partial one, and any delay of one thread (waking, another program)
    // became the other's wait; each block's sums do not depend on the split.
    const int64_t blocks_n = (N + kBf16GemmRows - 1) / kBf16GemmRows;
    ctx.pool().parallel_for_dynamic(blocks_n, [&](int64_t b0, int64_t b1) {
      const int64_t n0 = b0 * kBf16GemmRows, n1 = std::min(N, b1 * kBf16GemmRows);
      bf16_gemm_avx512(xp, {.W = W + n0 * K,
                            .n = n1 - n0,
                            .bias = bias ? bias + n0 : nullptr,
                            .accumulate = a.accumulate,
                            .y = y + n0,
                            .ldy = ldy});
    });
    return;
  }
  if (cpu_has_avx512()) {
    // Prefill on AVX-512: x packed once per call; each task widens its block
    // of weight rows to F32 once into a buffer of its thread (kept between
    // calls: nothing is allocated after the first) and runs the F32 kernel
    // of x86_f32_gemm.cpp over all M rows with it.
    const Tensor work = ctx.arena().alloc(DType::kF32, {f32_pack_bytes(M, K) / 4});
    void* packed = elements<float>(work);
    const F32PackedRows xp = pack_f32_rows_parallel(ctx.pool(), x, ldx, M, K, packed);
    ctx.pool().parallel_for((N + kBf16GemmRows - 1) / kBf16GemmRows, [&](int64_t b0, int64_t b1) {
      thread_local std::vector<float> widened;
      widened.resize(static_cast<size_t>(kBf16GemmRows * K));
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t n0 = blk * kBf16GemmRows, n = std::min(N, n0 + kBf16GemmRows) - n0;
        lowp_widen_rows(lowp_rows(a.W, n0), n, widened.data());
        f32_gemm_avx512(xp, {.W = widened.data(),
                             .n = n,
                             .bias = bias ? bias + n0 : nullptr,
                             .accumulate = a.accumulate,
                             .y = y + n0,
                             .ldy = ldy});
      }
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
    // per call (its cost at M = 1 is mostly that copy), and sgemv per row
    // would read W once per row; the matrix-vector kernel of lowp_linear.h
    // reads each vector of W once for all rows. Each output is the same
    // sum over K whatever the split and the other rows of the batch, so
    // results do not depend on the thread count or on the batch.
    for_each_gemv_block(pool, N, [&](int64_t n0, int64_t n1) {
      lowp_gemv({.W = {.dtype = DType::kF32, .data = W + n0 * K, .K = K},
                 .n = n1 - n0,
                 .x = x,
                 .ldx = ldx,
                 .M = M,
                 .bias = bias ? bias + n0 : nullptr,
                 .accumulate = a.accumulate,
                 .y = y + n0,
                 .ldy = ldy});
    });
    return;
  }
  if (cpu_has_avx512()) {
    // The AVX-512 kernel of x86_f32_gemm.cpp (OpenBLAS runs AVX2 kernels on
    // Zen 5): x packed once per call (in parallel), W read as stored, tasks
    // of kBf16GemmRows weight rows (a multiple of the tile's 6 and of 16).
    const Tensor work = ctx.arena().alloc(DType::kF32, {f32_pack_bytes(M, K) / 4});
    void* packed = elements<float>(work);
    const F32PackedRows xp = pack_f32_rows_parallel(pool, x, ldx, M, K, packed);
    // Handed out as the threads come free: each output's sum is the same
    // whichever task computes it (transposed_products.h, packed_product).
    pool.parallel_for_dynamic((N + kBf16GemmRows - 1) / kBf16GemmRows, [&](int64_t b0, int64_t b1) {
      const int64_t n0 = b0 * kBf16GemmRows, n1 = std::min(N, b1 * kBf16GemmRows);
      f32_gemm_avx512(xp, {.W = W + n0 * K,
                           .n = n1 - n0,
                           .bias = bias ? bias + n0 : nullptr,
                           .accumulate = a.accumulate,
                           .y = y + n0,
                           .ldy = ldy});
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
  // Tiles of at most kGemmRows x kGemmCols outputs, each one sgemm call. A
  // call packs its rows of x and its block of W once, costing about
  // 1/rows + 1/cols of its multiply-adds (each packed value ~16 of them):
  // 256 x 128 tiles lost ~18% of prefill time to packing; row blocks of 16
  // repacked all of W 32 times for a 512-token prompt. The columns are
  // split into equal blocks (a multiple of 16 floats: two threads never
  // write one cache line), so that the tasks balance over the threads. The
  // tile shapes depend on M and N only, never on the thread count, so
  // neither do the results; a column block's tiles are neighbours in the
  // task order, so one thread mostly runs them one after another with that
  // block of W still in cache.
  const int64_t row_blocks = (M + kGemmRows - 1) / kGemmRows;
  const int64_t col_blocks = (N + kGemmCols - 1) / kGemmCols;
  const int64_t cols = ((N + col_blocks - 1) / col_blocks + 15) / 16 * 16;
  pool.parallel_for(row_blocks * col_blocks, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t rb = t % row_blocks, cb = t / row_blocks;
      block(rb * kGemmRows, std::min(M, (rb + 1) * kGemmRows), std::min(N, cb * cols),
            std::min(N, (cb + 1) * cols));
    }
  });
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
  if (cpu_has_avx512() && M > kGemvMaxRows) {
    // The AVX-512 kernel of the forward: dx^T = W^T dy^T with W's columns
    // packed once per call and dy's rows read as stored, written transposed
    // (into dx's rows); dW += (dy^T) (x^T)^T with dy's columns packed and x
    // transposed once. OpenBLAS repacked W per block of 16 rows of dx and x
    // per block of 32 rows of dW, and ran AVX2 kernels.
    Arena::Scope scope(ctx.arena());
    if (dx) {
      void* packed = elements<float>(ctx.arena().alloc(DType::kF32, {f32_pack_bytes(K, N) / 4}));
      packed_product_transposed(pool, pack_f32_columns_parallel(pool, W, K, N, K, packed), dy, lddy,
                                M, a.accumulate_dx, dx, a.dx.row_stride());
    }
    if (dW) {
      float* xt = elements<float>(ctx.arena().alloc(DType::kF32, {K * M}));
      transpose_f32(pool, x, ldx, M, K, xt);
      void* packed = elements<float>(ctx.arena().alloc(DType::kF32, {f32_pack_bytes(N, M) / 4}));
      packed_product(pool, pack_f32_columns_parallel(pool, dy, lddy, M, N, packed), xt, K, true, dW,
                     K);
    }
    dx = dW = nullptr;  // done: only dbias is left for the loops below
  }
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

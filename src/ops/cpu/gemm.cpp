#include "ssm/ops/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace ssm::ops {
namespace {

// linear() with at most this many rows takes the matrix-vector path; a block
// of W of about kGemvBlockBytes is reused from L2 for every row.
constexpr int64_t kGemvMaxRows = 8;
constexpr int64_t kGemvBlockBytes = 256 << 10;

void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc) {
  if (M == 0 || N == 0) return;
  single_threaded_blas();
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

void linear(const float* x, int64_t M, int64_t K, const float* W, int64_t N, const float* bias,
            float* y, ThreadPool& pool, int64_t ldx, int64_t ldy) {
  if (ldx == 0) ldx = K;
  if (ldy == 0) ldy = N;
  if (M <= kGemvMaxRows) {
    // Decoding: a few rows against a large W. sgemm would repack all of W
    // per call (its cost at M = 1 is mostly that copy); matrix-vector
    // products over blocks of W that stay in L2 read it from memory once.
    // Each output is one sgemv over all of K whatever the split, so results
    // do not depend on the thread count or on the other rows of the batch.
    single_threaded_blas();
    const int64_t bn = std::max<int64_t>(16, std::min<int64_t>(256, (kGemvBlockBytes / 4) / std::max<int64_t>(K, 1)));
    const int64_t blocks = (N + bn - 1) / bn;
    pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t n0 = blk * bn, n = std::min(N, n0 + bn) - n0;
        for (int64_t m = 0; m < M; ++m) {
          float* out = y + m * ldy + n0;
          if (bias) std::memcpy(out, bias + n0, n * sizeof(float));
          if (K == 0) {
            if (!bias) std::memset(out, 0, n * sizeof(float));
            continue;
          }
          cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(n), static_cast<blasint>(K), 1.f,
                      W + n0 * K, static_cast<blasint>(K), x + m * ldx, 1, bias ? 1.f : 0.f, out, 1);
        }
      }
    });
    return;
  }
  auto rows = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    float* out = y + m0 * ldy + n0;
    if (bias)
      for (int64_t i = m0; i < m1; ++i) std::memcpy(y + i * ldy + n0, bias + n0, (n1 - n0) * sizeof(float));
    gemm(false, true, m1 - m0, n1 - n0, K, 1.f, x + m0 * ldx, ldx, W + n0 * K, K,
         bias ? 1.f : 0.f, out, ldy);
  };
  const int64_t threads = pool.size();
  if (M >= 4 * threads || N < 64 * threads) {
    // Row blocks of 16 keep each BLAS call efficient and the split fair.
    const int64_t blocks = (M + 15) / 16;
    pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
      rows(b0 * 16, std::min(M, b1 * 16), 0, N);
    });
  } else {
    const int64_t blocks = (N + 63) / 64;
    pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
      rows(0, M, b0 * 64, std::min(N, b1 * 64));
    });
  }
}

}  // namespace ssm::ops

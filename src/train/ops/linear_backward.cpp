#include "ssm/train/ops/linear_backward.h"

#include <algorithm>

#include "ssm/ops/gemm.h"

namespace ssm::ops {

void linear_backward(const LinearBackwardArgs& a, ThreadPool& pool) {
  const int64_t M = a.M, K = a.K, N = a.N;
  const int64_t ldx = a.ldx ? a.ldx : K, lddy = a.lddy ? a.lddy : N, lddx = a.lddx ? a.lddx : K;
  if (M == 0) return;
  if (a.dx) {
    constexpr int64_t kRows = 16;
    pool.parallel_for((M + kRows - 1) / kRows, [&](int64_t b0, int64_t b1) {
      const int64_t m0 = b0 * kRows, m1 = std::min(M, b1 * kRows);
      gemm(false, false, m1 - m0, K, N, 1.f, a.dy + m0 * lddy, lddy, a.W, K,
           a.accumulate_dx ? 1.f : 0.f, a.dx + m0 * lddx, lddx);
    });
  }
  if (a.dW || a.dbias) {
    // Each block of output features sums over all M rows in one BLAS call.
    constexpr int64_t kCols = 32;
    pool.parallel_for((N + kCols - 1) / kCols, [&](int64_t b0, int64_t b1) {
      const int64_t n0 = b0 * kCols, n1 = std::min(N, b1 * kCols);
      if (a.dW)
        gemm(true, false, n1 - n0, K, M, 1.f, a.dy + n0, lddy, a.x, ldx, 1.f, a.dW + n0 * K, K);
      if (a.dbias)
        for (int64_t n = n0; n < n1; ++n) {
          double s = 0;
          for (int64_t m = 0; m < M; ++m) s += a.dy[m * lddy + n];
          a.dbias[n] += static_cast<float>(s);
        }
    });
  }
}

}  // namespace ssm::ops

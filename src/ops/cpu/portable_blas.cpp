// gemm and gemv of blas.h without a BLAS library (-DSSM_BLAS=OFF, the
// WebAssembly build): Highway vectors of the compile-time target (SIMD128
// in WebAssembly, the baseline elsewhere), register-blocked so that each
// loaded element of B feeds several rows of C. Every output element sums its
// K products in ascending k, so results do not depend on the blocking.
#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "ops/cpu/blas.h"

namespace ssm::cpu {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Rows of C per micro-tile, and vectors of columns per micro-tile: 2 x 4
// sums, 4 vectors of B and a broadcast fit x86's 16 vector registers, which
// are all V8 gives WebAssembly's SIMD128. With 4 x 4 tiles (21 live vectors)
// its code spilled; 2 x 4 ran 1.2 to 1.7 times as fast in Node on the
// prefill's shapes (a 256 x 1216 x 256 projection, 64 x 64 x 64 chunks).
constexpr int kRows = 2;
constexpr int kCols = 4;

// C[r, j] = beta C[r, j] + alpha acc[r, j], beta 0 meaning C is not read
// (it may hold NaN before a first product).
inline V finish(const D d, V acc, float alpha, float beta, const float* c) {
  const V scaled = hn::Mul(acc, hn::Set(d, alpha));
  if (beta == 0.f) return scaled;
  return hn::MulAdd(hn::LoadU(d, c), hn::Set(d, beta), scaled);
}

inline float finish1(float acc, float alpha, float beta, float c) {
  return beta == 0.f ? alpha * acc : beta * c + alpha * acc;
}

// R rows of C from row i, columns [j, j + kCols vectors): the sum over k of
// A(i + r, k) B[k, j..]. A(i, k) is A[i * a_row + k * a_col].
template <int R>
void tile(const D d, int64_t K, const float* A, int64_t a_row, int64_t a_col, const float* B,
          int64_t ldb, float alpha, float beta, float* C, int64_t ldc) {
  const size_t n = hn::Lanes(d);
  V acc[R][kCols];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kCols; ++v) acc[r][v] = hn::Zero(d);
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    V bv[kCols];
    for (int v = 0; v < kCols; ++v) bv[v] = hn::LoadU(d, b + v * n);
    for (int r = 0; r < R; ++r) {
      const V a = hn::Set(d, A[r * a_row + k * a_col]);
      for (int v = 0; v < kCols; ++v) acc[r][v] = hn::MulAdd(a, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kCols; ++v) {
      float* c = C + r * ldc + v * n;
      hn::StoreU(finish(d, acc[r][v], alpha, beta, c), d, c);
    }
}

// The columns [j0, N) left over by the vector tiles, one at a time.
void edge_columns(int64_t M, int64_t N, int64_t K, int64_t j0, const float* A, int64_t a_row,
                  int64_t a_col, const float* B, int64_t ldb, float alpha, float beta, float* C,
                  int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = j0; j < N; ++j) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k) acc += A[i * a_row + k * a_col] * B[k * ldb + j];
      C[i * ldc + j] = finish1(acc, alpha, beta, C[i * ldc + j]);
    }
}

// C = alpha A B + beta C with B row-major (K, N), A addressed by strides.
void gemm_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t a_row,
             int64_t a_col, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const D d;
  const int64_t width = static_cast<int64_t>(hn::Lanes(d)) * kCols;
  int64_t j = 0;
  for (; j + width <= N; j += width) {
    int64_t i = 0;
    for (; i + kRows <= M; i += kRows)
      tile<kRows>(d, K, A + i * a_row, a_row, a_col, B + j, ldb, alpha, beta, C + i * ldc + j, ldc);
    for (; i < M; ++i)
      tile<1>(d, K, A + i * a_row, a_row, a_col, B + j, ldb, alpha, beta, C + i * ldc + j, ldc);
  }
  if (j < N) edge_columns(M, N, K, j, A, a_row, a_col, B, ldb, alpha, beta, C, ldc);
}

// dot(a, b) over K elements, in ascending k within each lane.
inline float dot(const D d, const float* a, const float* b, int64_t K) {
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  V acc = hn::Zero(d);
  int64_t k = 0;
  for (; k + n <= K; k += n) acc = hn::MulAdd(hn::LoadU(d, a + k), hn::LoadU(d, b + k), acc);
  float sum = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; k < K; ++k) sum += a[k] * b[k];
  return sum;
}

// Four dot products of W's rows [0, 4) with x, sharing the loads of x.
inline void dot4(const D d, const float* W, int64_t ldw, const float* x, int64_t K, float out[4]) {
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  V a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int64_t k = 0;
  for (; k + n <= K; k += n) {
    const V xv = hn::LoadU(d, x + k);
    a0 = hn::MulAdd(hn::LoadU(d, W + k), xv, a0);
    a1 = hn::MulAdd(hn::LoadU(d, W + ldw + k), xv, a1);
    a2 = hn::MulAdd(hn::LoadU(d, W + 2 * ldw + k), xv, a2);
    a3 = hn::MulAdd(hn::LoadU(d, W + 3 * ldw + k), xv, a3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(d, a0));
  out[1] = hn::GetLane(hn::SumOfLanes(d, a1));
  out[2] = hn::GetLane(hn::SumOfLanes(d, a2));
  out[3] = hn::GetLane(hn::SumOfLanes(d, a3));
  for (; k < K; ++k)
    for (int r = 0; r < 4; ++r) out[r] += W[r * ldw + k] * x[k];
}

// Inputs of at most this many rows multiply a transposed B as dot products
// rather than transposing it first.
constexpr int64_t kDotMaxRows = 8;

}  // namespace

void gemv(int64_t N, int64_t K, float alpha, const float* W, int64_t ldw, const float* x,
          float beta, float* y) {
  if (N == 0) return;
  const D d;
  int64_t i = 0;
  for (; i + 4 <= N; i += 4) {
    float s[4];
    dot4(d, W + i * ldw, ldw, x, K, s);
    for (int r = 0; r < 4; ++r) y[i + r] = finish1(s[r], alpha, beta, y[i + r]);
  }
  for (; i < N; ++i) y[i] = finish1(dot(d, W + i * ldw, x, K), alpha, beta, y[i]);
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  const int64_t a_row = trans_a ? 1 : lda, a_col = trans_a ? lda : 1;
  if (!trans_b) return gemm_nn(M, N, K, alpha, A, a_row, a_col, B, ldb, beta, C, ldc);
  if (!trans_a && M <= kDotMaxRows) {
    // op(B) = B^T: C's row i is B x A's row i.
    for (int64_t i = 0; i < M; ++i) gemv(N, K, alpha, B, ldb, A + i * lda, beta, C + i * ldc);
    return;
  }
  // B (N, K) transposed once into (K, N) rows, then the tiled product.
  thread_local std::vector<float> bt;
  bt.resize(static_cast<size_t>(K * N));
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < K; ++k) bt[static_cast<size_t>(k * N + j)] = B[j * ldb + k];
  gemm_nn(M, N, K, alpha, A, a_row, a_col, bt.data(), N, beta, C, ldc);
}

}  // namespace ssm::cpu

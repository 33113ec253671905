// The small F32 products of the chunked scans (SSD and Mamba-3: chunks of
// 64 steps, heads of 64 channels, states of 128) with AVX-512. OpenBLAS
// 0.3.21 runs its AVX2 kernels on Zen 5 (docs/CPU.md) and packs both
// operands on every call, which for products of 64 x 64 x 128 costs about
// as much as the multiply-adds; these shapes made up most of the scan's
// prefill time. Here op(B) is read as stored when it is (K, N) row-major
// and transposed once into a buffer on the stack otherwise; op(A) is read
// one element at a time (broadcast), whatever its layout. A tile of 6 rows
// of C by 64 columns keeps 24 accumulators in registers; each output is one
// F32 sum over k in ascending order (so the tile's shape changes no bit).
#include <algorithm>

#include "ops/cpu/blas.h"
#include "ops/cpu/x86_intrinsics.h"
#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {

bool small_gemm_fits(bool trans_b, int64_t M, int64_t N, int64_t K) {
  if (M > kSmallGemmMax || N > kSmallGemmMax || K > kSmallGemmMax) return false;
  return !trans_b || K * N <= kSmallGemmPack;
}

#if defined(__x86_64__)
namespace {

// Rows of C per tile: 24 accumulators. With 4 rows (16) each tile read all
// of op(B) again for 16 multiply-adds per k; op(B) of the SSD backward's
// 256 x 64 x 256 products (64 KiB) does not fit L1, and 6 rows read it a
// third less often: 7-8% more multiply-adds per second on those shapes on
// Zen 5, the same on the smaller ones (this loop in a standalone benchmark,
// best of 15 runs each).
constexpr int kRows = 6;
constexpr int kVectors = 4;  // vectors of 16 columns per tile

// sums[r][16 v + lane] for r < MR, v < NV: op(A) element (m, k) at
// A[m * a_row + k * a_col], op(B) row k at B + k * ldb, columns past `mask`
// zero. NV < kVectors for the last columns of a narrow C: the vectors past
// them would be all masked, so they are neither loaded nor multiplied. The
// sums go to memory with no condition in between, so that the accumulators
// stay in registers (with the alpha/beta epilogue here, GCC 12 kept them on
// the stack across the k loop).
template <int MR, int NV>
SSM_TARGET_AVX512 inline __attribute__((always_inline)) void tile(int64_t K, const float* A,
                                                                  int64_t a_row, int64_t a_col,
                                                                  const float* B, int64_t ldb,
                                                                  const __mmask16* mask,
                                                                  float* sums) {
  const __mmask16 m0 = mask[0], m1 = mask[1], m2 = mask[2], m3 = mask[3];
  __m512 acc[MR][kVectors];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b);
    const __m512 b1 = NV > 1 ? _mm512_maskz_loadu_ps(m1, b + 16) : b0;
    const __m512 b2 = NV > 2 ? _mm512_maskz_loadu_ps(m2, b + 32) : b0;
    const __m512 b3 = NV > 3 ? _mm512_maskz_loadu_ps(m3, b + 48) : b0;
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * a_row + k * a_col]);
      acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
      if constexpr (NV > 1) acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
      if constexpr (NV > 2) acc[r][2] = _mm512_fmadd_ps(a, b2, acc[r][2]);
      if constexpr (NV > 3) acc[r][3] = _mm512_fmadd_ps(a, b3, acc[r][3]);
    }
  }
  // All kVectors stored (zeros past NV): storing only NV of them, GCC 12
  // kept the accumulators on the stack again.
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < kVectors; ++v) _mm512_store_ps(sums + r * 64 + 16 * v, acc[r][v]);
}

// tile<MR, nv> for a run-time nv in 1..kVectors.
template <int MR>
SSM_TARGET_AVX512 inline __attribute__((always_inline)) void tile_of(
    int nv, int64_t K, const float* A, int64_t a_row, int64_t a_col, const float* B, int64_t ldb,
    const __mmask16* mask, float* sums) {
  switch (nv) {
    case 4:
      return tile<MR, 4>(K, A, a_row, a_col, B, ldb, mask, sums);
    case 3:
      return tile<MR, 3>(K, A, a_row, a_col, B, ldb, mask, sums);
    case 2:
      return tile<MR, 2>(K, A, a_row, a_col, B, ldb, mask, sums);
    default:
      return tile<MR, 1>(K, A, a_row, a_col, B, ldb, mask, sums);
  }
}

// C[r][..] = alpha sums[r][..] + beta C[r][..] over the columns of `mask`.
SSM_TARGET_AVX512 void finish(int rows, const float* sums, const __mmask16* mask, float alpha,
                              float beta, float* C, int64_t ldc) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < kVectors; ++v) {
      if (!mask[v]) continue;
      float* c = C + r * ldc + 16 * v;
      __m512 out = _mm512_mul_ps(_mm512_load_ps(sums + r * 64 + 16 * v), va);
      // beta 0: C is not read (it may hold anything before a first product).
      if (beta != 0.f) out = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], c), out);
      _mm512_mask_storeu_ps(c, mask[v], out);
    }
}

SSM_TARGET_AVX512 void product(int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                               int64_t a_row, int64_t a_col, const float* B, int64_t ldb,
                               float beta, float* C, int64_t ldc) {
  for (int64_t n0 = 0; n0 < N; n0 += 16 * kVectors) {
    __mmask16 mask[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      const int64_t left = std::clamp<int64_t>(N - n0 - 16 * v, 0, 16);
      mask[v] = static_cast<__mmask16>((1u << left) - 1);
    }
    const int nv = static_cast<int>(std::min<int64_t>(kVectors, (N - n0 + 15) / 16));
    const float* b = B + n0;
    alignas(64) float sums[kRows * 64];
    for (int64_t m = 0; m < M; m += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, M - m));
      const float* a = A + m * a_row;
      switch (rows) {
        case 6:
          tile_of<6>(nv, K, a, a_row, a_col, b, ldb, mask, sums);
          break;
        case 5:
          tile_of<5>(nv, K, a, a_row, a_col, b, ldb, mask, sums);
          break;
        case 4:
          tile_of<4>(nv, K, a, a_row, a_col, b, ldb, mask, sums);
          break;
        case 3:
          tile_of<3>(nv, K, a, a_row, a_col, b, ldb, mask, sums);
          break;
        case 2:
          tile_of<2>(nv, K, a, a_row, a_col, b, ldb, mask, sums);
          break;
        default:
          tile_of<1>(nv, K, a, a_row, a_col, b, ldb, mask, sums);
          break;
      }
      finish(rows, sums, mask, alpha, beta, C + m * ldc + n0, ldc);
    }
  }
}

// gemm_causal_scores of blas.h: B transposed once for all row blocks, each
// block over its columns only.
SSM_TARGET_AVX512 void causal_scores_avx512(int64_t M, int64_t K, int64_t unit, const float* A,
                                            int64_t lda, const float* B, int64_t ldb, float* C,
                                            int64_t ldc) {
  alignas(64) float bt[kSmallGemmPack];
  transpose_f32_avx512(B, ldb, M, K, bt, M);
  for (int64_t r0 = 0; r0 < M; r0 += kCausalRows) {
    const int64_t r1 = std::min(M, r0 + kCausalRows);
    product(r1 - r0, causal_columns(r0, M, unit), K, 1.f, A + r0 * lda, lda, 1, bt, M, 0.f,
            C + r0 * ldc, ldc);
  }
}

}  // namespace

SSM_TARGET_AVX512 void small_gemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N,
                                         int64_t K, float alpha, const float* A, int64_t lda,
                                         const float* B, int64_t ldb, float beta, float* C,
                                         int64_t ldc) {
  const int64_t a_row = trans_a ? 1 : lda, a_col = trans_a ? lda : 1;
  if (!trans_b) return product(M, N, K, alpha, A, a_row, a_col, B, ldb, beta, C, ldc);
  // B is (N, K): its transpose, (K, N) rows, into a buffer (128 KiB at most).
  alignas(64) float bt[kSmallGemmPack];
  transpose_f32_avx512(B, ldb, N, K, bt, N);
  product(M, N, K, alpha, A, a_row, a_col, bt, N, beta, C, ldc);
}
bool small_causal_scores(int64_t M, int64_t K, int64_t unit, const float* A, int64_t lda,
                         const float* B, int64_t ldb, float* C, int64_t ldc) {
  if (!small_gemm_fits(true, M, M, K) || !cpu_has_avx512()) return false;
  causal_scores_avx512(M, K, unit, A, lda, B, ldb, C, ldc);
  return true;
}
#else
bool small_causal_scores(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t,
                         float*, int64_t) {
  return false;
}
void small_gemm_avx512(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                       const float*, int64_t, float, float*, int64_t) {}
#endif

}  // namespace ssm::cpu

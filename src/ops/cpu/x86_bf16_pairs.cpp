// The chunked scans' products with BF16 inputs (AVX-512 BF16: the state's,
// and Mamba-3's scores and their product with v), for models whose
// projections already run in BF16: vdpbf16ps multiplies pairs
// of BF16 values and adds both products to an F32 lane, twice the F32
// multiply-adds of an FMA. Operands are words of two BF16 values (the lower
// half first), paired along the sum's index k: a pair of row elements
// (bf16_row_words) or the same column of two rows (bf16_row_pairs). The
// product's tile is the F32 small gemm's (x86_small_gemm.cpp): 4 rows of C
// by 64 columns, one word of A broadcast per row and pair, masked loads and
// stores past N.
#include <algorithm>

#include "ops/cpu/blas.h"
#include "ops/cpu/x86_intrinsics.h"
#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {

#if defined(__x86_64__)
namespace {

// Mask of the first n (0..16) lanes.
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF)
                 : static_cast<__mmask16>((1u << std::max<int64_t>(n, 0)) - 1);
}

// 16 F32 values times s, +0 past the mask (not -0 where s < 0).
SSM_TARGET_BF16 inline __m512 scaled_load(const float* p, __mmask16 m, float s) {
  return _mm512_maskz_mul_ps(m, _mm512_maskz_loadu_ps(m, p), _mm512_set1_ps(s));
}

constexpr int kRows = 4;     // rows of C per tile
constexpr int kVectors = 4;  // vectors of 16 columns per tile

// sums[r][16 v + lane] = sum over pairs of A word (r, j) . B word (j, 16 v +
// lane); columns past `mask` zero. As in the F32 tile, every sum goes to
// memory with no condition in between so that the accumulators stay in
// registers.
template <int MR, int NV>
SSM_TARGET_BF16 inline __attribute__((always_inline)) void tile(int64_t pairs, const uint32_t* A,
                                                                int64_t a_row, int64_t a_col,
                                                                const uint32_t* B, int64_t ldb,
                                                                const __mmask16* mask,
                                                                float* sums) {
  __m512 acc[MR][kVectors];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t j = 0; j < pairs; ++j) {
    const uint32_t* b = B + j * ldb;
    __m512bh bv[kVectors];
    for (int v = 0; v < NV; ++v)
      bv[v] = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi32(mask[v], b + 16 * v));
    for (int r = 0; r < MR; ++r) {
      const __m512bh a =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(A[r * a_row + j * a_col])));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, bv[v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < kVectors; ++v) _mm512_store_ps(sums + r * 64 + 16 * v, acc[r][v]);
}

template <int MR>
SSM_TARGET_BF16 inline __attribute__((always_inline)) void tile_of(
    int nv, int64_t pairs, const uint32_t* A, int64_t a_row, int64_t a_col, const uint32_t* B,
    int64_t ldb, const __mmask16* mask, float* sums) {
  switch (nv) {
    case 4:
      return tile<MR, 4>(pairs, A, a_row, a_col, B, ldb, mask, sums);
    case 3:
      return tile<MR, 3>(pairs, A, a_row, a_col, B, ldb, mask, sums);
    case 2:
      return tile<MR, 2>(pairs, A, a_row, a_col, B, ldb, mask, sums);
    default:
      return tile<MR, 1>(pairs, A, a_row, a_col, B, ldb, mask, sums);
  }
}

// C[r][..] = s_r sums[r][..] + beta C[r][..] over the columns of `mask`
// (s = row_scale, null: 1); beta 0: C is not read.
SSM_TARGET_BF16 void finish(int rows, const float* sums, const __mmask16* mask,
                            const float* row_scale, float beta, float* C, int64_t ldc) {
  const __m512 vb = _mm512_set1_ps(beta);
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < kVectors; ++v) {
      if (!mask[v]) continue;
      float* c = C + r * ldc + 16 * v;
      __m512 out = _mm512_load_ps(sums + r * 64 + 16 * v);
      if (row_scale) out = _mm512_mul_ps(out, _mm512_set1_ps(row_scale[r]));
      if (beta != 0.f) out = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], c), out);
      _mm512_mask_storeu_ps(c, mask[v], out);
    }
}

}  // namespace

SSM_TARGET_BF16 void bf16_row_words(const float* a, int64_t lda, const float* scale, int64_t rows,
                                    int64_t cols, uint32_t* out, int64_t ldo) {
  const int64_t words = (cols + 1) / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scale ? scale[r] : 1.f;
    const float* row = a + r * lda;
    for (int64_t k = 0; k < cols; k += 32) {
      const __m512 lo = scaled_load(row + k, first_lanes(cols - k), s);
      const __m512 hi = scaled_load(row + k + 16, first_lanes(cols - k - 16), s);
      // cvtne2ps_pbh(hi, lo): the 16 BF16 of lo, then hi's: 16 words in order.
      _mm512_mask_storeu_epi32(out + r * ldo + k / 2, first_lanes(words - k / 2),
                               reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
    }
  }
}

SSM_TARGET_BF16 void bf16_row_pairs(const float* a, int64_t lda, const float* scale, int64_t rows,
                                    int64_t cols, uint32_t* out, int64_t ldo) {
  // Lane i of the result: 16-bit element i of the first row's 16, then the
  // second's (element 16 + i).
  alignas(64) static constexpr int16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(kInterleave);
  for (int64_t j = 0; j < (rows + 1) / 2; ++j) {
    const int64_t r0 = 2 * j;
    const bool second = r0 + 1 < rows;
    const float s0 = scale ? scale[r0] : 1.f;
    const float s1 = second ? (scale ? scale[r0 + 1] : 1.f) : 0.f;
    const float* row0 = a + r0 * lda;
    const float* row1 = second ? row0 + lda : row0;  // times 0 past the last row
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 m = first_lanes(cols - c);
      // A row past the last is zero, not a product with it (that would keep
      // an infinity or a NaN of the last row).
      const __m512 v0 = scaled_load(row0 + c, m, s0);
      const __m512 v1 = second ? scaled_load(row1 + c, m, s1) : _mm512_setzero_ps();
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v1, v0));
      _mm512_mask_storeu_epi32(out + j * ldo + c, m, _mm512_permutexvar_epi16(order, both));
    }
  }
}

SSM_TARGET_BF16 void bf16_pair_product(int64_t M, int64_t N, int64_t pairs, const uint32_t* A,
                                       int64_t a_row, int64_t a_col, const uint32_t* B, int64_t ldb,
                                       const float* row_scale, float beta, float* C, int64_t ldc) {
  for (int64_t n0 = 0; n0 < N; n0 += 16 * kVectors) {
    __mmask16 mask[kVectors];
    for (int v = 0; v < kVectors; ++v) mask[v] = first_lanes(N - n0 - 16 * v);
    const int nv = static_cast<int>(std::min<int64_t>(kVectors, (N - n0 + 15) / 16));
    const uint32_t* b = B + n0;
    alignas(64) float sums[2 * kRows * 64];
    int64_t m = 0;
    // Narrow products (a causal block's first columns) take 8 rows a tile:
    // 4 rows of 1 or 2 vectors are too few independent sums to cover the
    // instruction's latency. Each sum is the same whatever the tile.
    for (; nv <= 2 && m + 2 * kRows <= M; m += 2 * kRows) {
      const uint32_t* am = A + m * a_row;
      if (nv == 2)
        tile<2 * kRows, 2>(pairs, am, a_row, a_col, b, ldb, mask, sums);
      else
        tile<2 * kRows, 1>(pairs, am, a_row, a_col, b, ldb, mask, sums);
      finish(2 * kRows, sums, mask, row_scale ? row_scale + m : nullptr, beta, C + m * ldc + n0,
             ldc);
    }
    for (; m < M; m += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, M - m));
      const uint32_t* am = A + m * a_row;
      switch (rows) {
        case 4:
          tile_of<4>(nv, pairs, am, a_row, a_col, b, ldb, mask, sums);
          break;
        case 3:
          tile_of<3>(nv, pairs, am, a_row, a_col, b, ldb, mask, sums);
          break;
        case 2:
          tile_of<2>(nv, pairs, am, a_row, a_col, b, ldb, mask, sums);
          break;
        default:
          tile_of<1>(nv, pairs, am, a_row, a_col, b, ldb, mask, sums);
          break;
      }
      finish(rows, sums, mask, row_scale ? row_scale + m : nullptr, beta, C + m * ldc + n0, ldc);
    }
  }
}

void bf16_causal_scores(int64_t M, int64_t K, int64_t unit, const uint32_t* a_words, int64_t lda,
                        const float* B, int64_t ldb, float* C, int64_t ldc, uint32_t* work) {
  // B's words (M, Kw), then transposed to (Kw, M): the rows of the
  // product's second operand. The words' bits only move in the transpose.
  const int64_t Kw = (K + 1) / 2;
  uint32_t* rows = work;
  uint32_t* bt = work + M * Kw;
  bf16_row_words(B, ldb, nullptr, M, K, rows, Kw);
  transpose_f32_avx512(reinterpret_cast<const float*>(rows), Kw, M, Kw, reinterpret_cast<float*>(bt),
                       M);
  for (int64_t r0 = 0; r0 < M; r0 += kCausalRows) {
    const int64_t r1 = std::min(M, r0 + kCausalRows);
    bf16_pair_product(r1 - r0, causal_columns(r0, M, unit), Kw, a_words + r0 * lda, lda, 1, bt, M,
                      nullptr, 0.f, C + r0 * ldc, ldc);
  }
}

void bf16_causal_product(int64_t M, int64_t N, int64_t unit, const float* A, int64_t lda,
                         const uint32_t* b_pairs, int64_t ldb, float* C, int64_t ldc,
                         uint32_t* work) {
  const int64_t Mw = (M + 1) / 2;
  for (int64_t r0 = 0; r0 < M; r0 += kCausalRows) {
    const int64_t r1 = std::min(M, r0 + kCausalRows), cols = causal_columns(r0, M, unit);
    // Only the columns the block reads: past them A is not written. An odd
    // count's last word ends in a zero, as b_pairs' last row pair does.
    uint32_t* aw = work + r0 * Mw;
    bf16_row_words(A + r0 * lda, lda, nullptr, r1 - r0, cols, aw, Mw);
    bf16_pair_product(r1 - r0, N, (cols + 1) / 2, aw, Mw, 1, b_pairs, ldb, nullptr, 0.f,
                      C + r0 * ldc, ldc);
  }
}
#else
void bf16_row_words(const float*, int64_t, const float*, int64_t, int64_t, uint32_t*, int64_t) {}
void bf16_row_pairs(const float*, int64_t, const float*, int64_t, int64_t, uint32_t*, int64_t) {}
void bf16_pair_product(int64_t, int64_t, int64_t, const uint32_t*, int64_t, int64_t,
                       const uint32_t*, int64_t, const float*, float, float*, int64_t) {}
void bf16_causal_scores(int64_t, int64_t, int64_t, const uint32_t*, int64_t, const float*, int64_t,
                        float*, int64_t, uint32_t*) {}
void bf16_causal_product(int64_t, int64_t, int64_t, const float*, int64_t, const uint32_t*,
                         int64_t, float*, int64_t, uint32_t*) {}
#endif

}  // namespace ssm::cpu

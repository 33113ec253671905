// Transposes with AVX-512: blocks of 16 x 16 floats in registers, for the
// small products' operands (x86_small_gemm.cpp) and the training products'
// layouts (packed rows, transposed weights and activations), whose scalar
// loops wrote one float per 64-byte line.
#include "ops/cpu/x86_intrinsics.h"
#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {

#if defined(__x86_64__)
namespace {

// bt[k][n] = B[n][k] for a block of 16 x 16: rows of B loaded whole, then
// interleaved in registers (pairs of values, pairs of pairs, then 128-bit
// lanes twice).
SSM_TARGET_AVX512 void transpose16(const float* B, int64_t ldb, float* bt, int64_t ldt) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(B + i * ldb);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4 g + e], lane L: rows 4 g .. 4 g + 3, element 4 L + e.
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 2]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 1]), d = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  for (int e = 0; e < 4; ++e) {
    t[e] = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x88);
    t[4 + e] = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xdd);
    t[8 + e] = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x88);
    t[12 + e] = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xdd);
  }
  for (int j = 0; j < 8; ++j) {
    _mm512_storeu_ps(bt + j * ldt, _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88));
    _mm512_storeu_ps(bt + (j + 8) * ldt, _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd));
  }
}

}  // namespace

SSM_TARGET_AVX512 void transpose_f32_avx512(const float* a, int64_t lda, int64_t rows, int64_t cols,
                                            float* out, int64_t ldo) {
  const int64_t r16 = rows / 16 * 16, c16 = cols / 16 * 16;
  for (int64_t r0 = 0; r0 < r16; r0 += 16)
    for (int64_t c0 = 0; c0 < c16; c0 += 16)
      transpose16(a + r0 * lda + c0, lda, out + c0 * ldo + r0, ldo);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = r < r16 ? c16 : 0; c < cols; ++c) out[c * ldo + r] = a[r * lda + c];
}
#else
void transpose_f32_avx512(const float*, int64_t, int64_t, int64_t, float*, int64_t) {}
#endif

}  // namespace ssm::cpu

// The AVX-512 prefill kernels' writer of a whole tile (x86_f32_gemm.cpp,
// x86_bf16_gemm.cpp): kGemmTileRows weight rows by 16 V activation rows of
// sums, still in registers, into y. Included only by x86_*.cpp files (it
// needs x86_intrinsics.h); each caller's target includes AVX-512 F/DQ.
#pragma once

#include <cstdint>

#include "ops/cpu/x86_gemm_tiles.h"
#include "ops/cpu/x86_intrinsics.h"

namespace ssm::cpu {

#if defined(__x86_64__)
// y[m][0, 6) (+)= acc[.][m] + bias, the operations of for_each_gemm_tile's
// scalar writer in its order, so that the results are its own to the bit.
// Each output row takes 6 contiguous floats, from a transpose in registers
// (lane m of the 6 row vectors); the scalar writer, 384 strided loads and
// stores a tile, was a fifth of the products whose sums run over 256 values
// (the head's backward) and an eighth of the BF16 projections' time.
template <int V>
SSM_TARGET_AVX512 inline __attribute__((always_inline)) void store_tile_to_y(
    const __m512 (&acc)[kGemmTileRows][V], float* y, int64_t ldy, const float* bias,
    bool accumulate) {
  static_assert(kGemmTileRows == 6, "the transpose below takes 6 rows");
  const __m128 zero = _mm_setzero_ps();
  const __m128 b03 = bias ? _mm_loadu_ps(bias) : zero;
  const __m128 b45 =
      bias ? _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bias + 4))) : zero;
  for (int v = 0; v < V; ++v) {
    // Lane q (4 floats) of t[0..3]: rows 0-3 of activation row 4 q + i;
    // of t[4] and t[5]: rows 4-5 of activation rows 4 q, 4 q + 1 and
    // 4 q + 2, 4 q + 3.
    const __m512 p0 = _mm512_unpacklo_ps(acc[0][v], acc[1][v]);
    const __m512 p1 = _mm512_unpackhi_ps(acc[0][v], acc[1][v]);
    const __m512 p2 = _mm512_unpacklo_ps(acc[2][v], acc[3][v]);
    const __m512 p3 = _mm512_unpackhi_ps(acc[2][v], acc[3][v]);
    alignas(64) float t[6][16];
    _mm512_store_ps(t[0], _mm512_shuffle_ps(p0, p2, _MM_SHUFFLE(1, 0, 1, 0)));
    _mm512_store_ps(t[1], _mm512_shuffle_ps(p0, p2, _MM_SHUFFLE(3, 2, 3, 2)));
    _mm512_store_ps(t[2], _mm512_shuffle_ps(p1, p3, _MM_SHUFFLE(1, 0, 1, 0)));
    _mm512_store_ps(t[3], _mm512_shuffle_ps(p1, p3, _MM_SHUFFLE(3, 2, 3, 2)));
    _mm512_store_ps(t[4], _mm512_unpacklo_ps(acc[4][v], acc[5][v]));
    _mm512_store_ps(t[5], _mm512_unpackhi_ps(acc[4][v], acc[5][v]));
    for (int q = 0; q < 4; ++q)
      for (int i = 0; i < 4; ++i) {
        float* row = y + (16 * v + 4 * q + i) * ldy;
        __m128 r03 = _mm_add_ps(_mm_load_ps(&t[i][4 * q]), b03);
        __m128 r45 = _mm_add_ps(_mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(
                                    &t[4 + i / 2][4 * q + 2 * (i % 2)]))),
                                b45);
        if (accumulate) {
          r03 = _mm_add_ps(_mm_loadu_ps(row), r03);
          // 64-bit loads and stores of two floats: row + 4 is only 4-byte aligned.
          r45 = _mm_add_ps(
              _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + 4))), r45);
        }
        _mm_storeu_ps(row, r03);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(row + 4), _mm_castps_si128(r45));
      }
  }
}
#endif

}  // namespace ssm::cpu

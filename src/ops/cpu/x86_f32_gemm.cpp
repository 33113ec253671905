// F32 matrix products with AVX-512 for prefill. OpenBLAS 0.3.21 does not
// know AMD family 26 (Zen 5) and runs its AVX2 (Haswell) kernels there, at
// about half of what the core's 512-bit multiply-adds do. The tile is the
// one of x86_bf16_gemm.cpp (the loop around it is x86_gemm_tiles.h): a
// weight of one row broadcast against 16
// activation rows per vector (x packed once per call, W read as stored),
// 6 weight rows x 64 activation rows, 24 accumulators in registers.
#include <algorithm>

#include "ops/cpu/x86_gemm_tiles.h"
#include "ops/cpu/x86_intrinsics.h"
#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {

#if defined(__x86_64__)
bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
  return has;
}

F32PackedRows pack_f32_rows(const float* x, int64_t ldx, int64_t M, int64_t K, void* workspace,
                            int64_t b0, int64_t b1) {
  auto* out = static_cast<float*>(workspace);
  for (int64_t b = b0; b < b1; ++b) {
    // The block is the transpose of its 16 rows (K rows of 16).
    float* block = out + b * K * 16;
    const int64_t rows = std::min<int64_t>(16, M - b * 16);
    transpose_f32_avx512(x + b * 16 * ldx, ldx, rows, K, block, 16);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t l = rows; l < 16; ++l) block[k * 16 + l] = 0.f;
  }
  return {.data = out, .M = M, .K = K};
}

namespace {

// acc[r][v] = sum over k of W row r (rows ldw apart) against activation
// block v, in order.
template <int NR, int V>
SSM_TARGET_AVX512 inline void f32_sums(const float* xb, int64_t K, const float* W, int64_t ldw,
                                       __m512 (&acc)[NR][V]) {
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 xv[V];
    for (int v = 0; v < V; ++v) xv[v] = _mm512_loadu_ps(xb + (v * K + k) * 16);
    for (int r = 0; r < NR; ++r) {
      const __m512 wb = _mm512_set1_ps(W[r * ldw + k]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(wb, xv[v], acc[r][v]);
    }
  }
}

// The sums stored to tile[r * 64 + 16 v + lane], for the loop's writer.
template <int NR, int V>
SSM_TARGET_AVX512 void f32_tile(const float* xb, int64_t K, const float* W, int64_t ldw,
                                float* tile) {
  __m512 acc[NR][V];
  f32_sums<NR, V>(xb, K, W, ldw, acc);
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(tile + r * 64 + v * 16, acc[r][v]);
}

// A whole tile (6 weight rows, 16 V activation rows) written into y by
// vectors: y[m][0, 6) (+)= sums + bias, the operations of the loop's scalar
// writer in its order. Each output row takes 6 contiguous floats, from a
// transpose in registers (lane m of the 6 row vectors); the scalar writer,
// 384 strided loads and stores a tile, was a fifth of the products whose
// sums run over 256 values (the head's backward).
template <int V>
SSM_TARGET_AVX512 void f32_tile_to_y(const float* xb, int64_t K, const float* W, int64_t ldw,
                                     float* y, int64_t ldy, const float* bias, bool accumulate) {
  __m512 acc[kGemmTileRows][V];
  f32_sums<kGemmTileRows, V>(xb, K, W, ldw, acc);
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

// The same for y[j][m] (transposed_y): each sum vector is 16 contiguous
// outputs of a row of y, written as it is; the scalar writer's operations
// (sum + bias, then y + that) lane by lane.
template <int V>
SSM_TARGET_AVX512 void f32_tile_to_yt(const float* xb, int64_t K, const float* W, int64_t ldw,
                                      float* y, int64_t ldy, const float* bias, bool accumulate) {
  __m512 acc[kGemmTileRows][V];
  f32_sums<kGemmTileRows, V>(xb, K, W, ldw, acc);
  for (int r = 0; r < kGemmTileRows; ++r) {
    const __m512 b = _mm512_set1_ps(bias ? bias[r] : 0.f);
    for (int v = 0; v < V; ++v) {
      float* row = y + r * ldy + 16 * v;
      __m512 out = _mm512_add_ps(acc[r][v], b);
      if (accumulate) out = _mm512_add_ps(_mm512_loadu_ps(row), out);
      _mm512_storeu_ps(row, out);
    }
  }
}

}  // namespace

void f32_gemm_avx512(const F32PackedRows& x, const F32GemmJob& job) {
  const int64_t K = x.K, ldw = job.ldw ? job.ldw : K;
  const GemmTileOutput out{.n = job.n,
                           .bias = job.bias,
                           .accumulate = job.accumulate,
                           .y = job.y,
                           .ldy = job.ldy,
                           .transposed = job.transposed_y};
  for_each_gemm_tile(x.M, out, [&](int vectors, int64_t b0, int64_t j0, int rows, float* sums) {
    const float* xb = x.data + b0 * K * 16;
    const float* W = job.W + j0 * ldw;
    const bool whole = rows == kGemmTileRows && (b0 + vectors) * 16 <= x.M;
    const float* bias = job.bias ? job.bias + j0 : nullptr;
    with_tile_vectors(vectors, [&](auto v) {
      constexpr int V = decltype(v)::value;
      if (whole && job.transposed_y)
        f32_tile_to_yt<V>(xb, K, W, ldw, job.y + j0 * job.ldy + b0 * 16, job.ldy, bias,
                          job.accumulate);
      else if (whole)
        f32_tile_to_y<V>(xb, K, W, ldw, job.y + b0 * 16 * job.ldy + j0, job.ldy, bias,
                         job.accumulate);
      else if (rows == kGemmTileRows)
        f32_tile<kGemmTileRows, V>(xb, K, W, ldw, sums);
      else
        for (int r = 0; r < rows; ++r) f32_tile<1, V>(xb, K, W + r * ldw, ldw, sums + r * 64);
    });
    return whole;
  });
}
#else
bool cpu_has_avx512() { return false; }
F32PackedRows pack_f32_rows(const float*, int64_t, int64_t, int64_t, void*, int64_t, int64_t) {
  return {};
}
void f32_gemm_avx512(const F32PackedRows&, const F32GemmJob&) {}
#endif

}  // namespace ssm::cpu

// F32 matrix products with AVX-512 for prefill. OpenBLAS 0.3.21 does not
// know AMD family 26 (Zen 5) and runs its AVX2 (Haswell) kernels there, at
// about half of what the core's 512-bit multiply-adds do. The tile is the
// one of x86_bf16_gemm.cpp (the loop around it is x86_gemm_tiles.h): a
// weight of one row broadcast against 16
// activation rows per vector (x packed once per call, W read as stored),
// 6 weight rows x 64 activation rows, 24 accumulators in registers.
#include <algorithm>

#include "ops/cpu/x86_gemm_tiles.h"
#include "ops/cpu/x86_gemm_writer.h"
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
// vectors (x86_gemm_writer.h).
template <int V>
SSM_TARGET_AVX512 void f32_tile_to_y(const float* xb, int64_t K, const float* W, int64_t ldw,
                                     float* y, int64_t ldy, const float* bias, bool accumulate) {
  __m512 acc[kGemmTileRows][V];
  f32_sums<kGemmTileRows, V>(xb, K, W, ldw, acc);
  store_tile_to_y<V>(acc, y, ldy, bias, accumulate);
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

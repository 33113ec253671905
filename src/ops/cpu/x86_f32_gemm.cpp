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
    float* block = out + b * K * 16;
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t m = b * 16 + l;
      if (m >= M) {
        for (int64_t k = 0; k < K; ++k) block[k * 16 + l] = 0.f;
        continue;
      }
      const float* row = x + m * ldx;
      for (int64_t k = 0; k < K; ++k) block[k * 16 + l] = row[k];
    }
  }
  return {.data = out, .M = M, .K = K};
}

namespace {

// acc[r][v] = sum over k of W row r against activation block v, in order;
// stored to tile[r * 64 + 16 v + lane].
template <int NR, int V>
SSM_TARGET_AVX512 void f32_tile(const float* xb, int64_t K, const float* W, float* tile) {
  __m512 acc[NR][V];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 xv[V];
    for (int v = 0; v < V; ++v) xv[v] = _mm512_loadu_ps(xb + (v * K + k) * 16);
    for (int r = 0; r < NR; ++r) {
      const __m512 wb = _mm512_set1_ps(W[r * K + k]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(wb, xv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(tile + r * 64 + v * 16, acc[r][v]);
}

}  // namespace

void f32_gemm_avx512(const F32PackedRows& x, const F32GemmJob& job) {
  const int64_t K = x.K;
  const GemmTileOutput out{
      .n = job.n, .bias = job.bias, .accumulate = job.accumulate, .y = job.y, .ldy = job.ldy};
  for_each_gemm_tile(x.M, out, [&](int vectors, int64_t b0, int64_t j0, int rows, float* sums) {
    const float* xb = x.data + b0 * K * 16;
    const float* W = job.W + j0 * K;
    with_tile_vectors(vectors, [&](auto v) {
      if (rows == kGemmTileRows)
        f32_tile<kGemmTileRows, decltype(v)::value>(xb, K, W, sums);
      else
        for (int r = 0; r < rows; ++r)
          f32_tile<1, decltype(v)::value>(xb, K, W + r * K, sums + r * 64);
    });
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

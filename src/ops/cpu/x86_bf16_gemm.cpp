// BF16 matrix products with AVX-512 BF16: vdpbf16ps adds to each F32 lane
// the dot product of a pair of BF16 values from each operand, 32 products per
// instruction, twice the F32 multiply-add rate. The tile broadcasts a pair of
// one weight row (W is read as stored, never packed) against 16 activation
// rows per vector, packed once per call; 6 weight rows x 4 vectors (64
// activation rows) keep 24 accumulators in registers, each weight pair and
// activation vector loaded once per 24 instructions.
#include <algorithm>
#include <cstring>

#include "ops/cpu/x86_gemm_tiles.h"
#include "ops/cpu/x86_intrinsics.h"
#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {

#if defined(__x86_64__)
bool cpu_has_avx512_bf16() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
}

SSM_TARGET_BF16 Bf16PackedRows pack_bf16_rows(const float* x, int64_t ldx, int64_t M, int64_t K,
                                              void* workspace, int64_t b0, int64_t b1) {
  const int64_t pairs = bf16_pair_count(K);
  auto* out = static_cast<uint32_t*>(workspace);
  alignas(64) uint32_t words[16];
  for (int64_t b = b0; b < b1; ++b) {
    uint32_t* block = out + b * pairs * 16;
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t m = b * 16 + l;
      if (m >= M) {
        for (int64_t p = 0; p < pairs; ++p) block[p * 16 + l] = 0;
        continue;
      }
      const float* row = x + m * ldx;
      for (int64_t k = 0; k < K; k += 32) {
        // 32 values (zeros past K) -> 16 words of two BF16 each, in order.
        const int64_t left = K - k;
        const __mmask16 lo_mask = left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1);
        const __mmask16 hi_mask = left >= 32   ? 0xFFFF
                                  : left <= 16 ? 0
                                               : static_cast<__mmask16>((1u << (left - 16)) - 1);
        const __m512 lo = _mm512_maskz_loadu_ps(lo_mask, row + k);
        const __m512 hi = _mm512_maskz_loadu_ps(hi_mask, row + k + 16);
        _mm512_store_si512(words, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
        const int64_t p0 = k / 2, n = std::min<int64_t>(16, pairs - p0);
        for (int64_t i = 0; i < n; ++i) block[(p0 + i) * 16 + l] = words[i];
      }
    }
  }
  return {.data = out, .M = M, .K = K, .pairs = pairs};
}

namespace {

// acc[r][v] = sum over pairs of W row r against activation block v; stored
// to tile[r][16 v + lane].
template <int NR, int V>
SSM_TARGET_BF16 void bf16_tile(const uint32_t* xb, int64_t pairs, const uint16_t* W, int64_t K,
                               float* tile) {
  __m512 acc[NR][V];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  const int64_t full = K / 2;
  for (int64_t p = 0; p < full; ++p) {
    __m512bh xv[V];
    for (int v = 0; v < V; ++v)
      xv[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xb + (v * pairs + p) * 16));
    for (int r = 0; r < NR; ++r) {
      uint32_t word;
      std::memcpy(&word, W + r * K + 2 * p, 4);
      const __m512bh wb = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(word)));
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], wb, xv[v]);
    }
  }
  if (K % 2) {  // the last column alone: its pair's second half is zero
    __m512bh xv[V];
    for (int v = 0; v < V; ++v)
      xv[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xb + (v * pairs + full) * 16));
    for (int r = 0; r < NR; ++r) {
      const __m512bh wb = reinterpret_cast<__m512bh>(_mm512_set1_epi32(W[r * K + K - 1]));
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], wb, xv[v]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(tile + r * 64 + v * 16, acc[r][v]);
}

}  // namespace

void bf16_gemm_avx512(const Bf16PackedRows& x, const Bf16GemmJob& job) {
  const int64_t K = x.K, pairs = x.pairs;
  const GemmTileOutput out{
      .n = job.n, .bias = job.bias, .accumulate = job.accumulate, .y = job.y, .ldy = job.ldy};
  for_each_gemm_tile(x.M, out, [&](int vectors, int64_t b0, int64_t j0, int rows, float* sums) {
    const uint32_t* xb = x.data + b0 * pairs * 16;
    const uint16_t* W = job.W + j0 * K;
    with_tile_vectors(vectors, [&](auto v) {
      if (rows == kGemmTileRows)
        bf16_tile<kGemmTileRows, decltype(v)::value>(xb, pairs, W, K, sums);
      else
        for (int r = 0; r < rows; ++r)
          bf16_tile<1, decltype(v)::value>(xb, pairs, W + r * K, K, sums + r * 64);
    });
    return false;
  });
}
#else
bool cpu_has_avx512_bf16() { return false; }
Bf16PackedRows pack_bf16_rows(const float*, int64_t, int64_t, int64_t, void*, int64_t, int64_t) {
  return {};
}
void bf16_gemm_avx512(const Bf16PackedRows&, const Bf16GemmJob&) {}
#endif

}  // namespace ssm::cpu

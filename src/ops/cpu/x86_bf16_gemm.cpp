// BF16 matrix products with AVX-512 BF16: vdpbf16ps adds to each F32 lane
// the dot product of a pair of BF16 values from each operand, 32 products per
// instruction, twice the F32 multiply-add rate. The tile broadcasts a pair of
// one weight row (W is read as stored, never packed) against 16 activation
// rows per vector, packed once per call; 6 weight rows x 4 vectors (64
// activation rows) keep 24 accumulators in registers, each weight pair and
// activation vector loaded once per 24 instructions.
#include <algorithm>
#include <cstring>

#include "ops/cpu/x86_bf16_round.h"
#include "ops/cpu/x86_gemm_tiles.h"
#include "ops/cpu/x86_gemm_writer.h"
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
  // A block is the transpose of its 16 rows' words: each row's words for 32
  // pairs at a time go to a buffer (zeros past M), which is transposed into
  // the block in registers. The words' bits only move (no arithmetic), and
  // the scalar store per word it replaces wrote one word per 64-byte line.
  constexpr int64_t kPairs = 32;
  alignas(64) uint32_t words[16 * kPairs];
  for (int64_t b = b0; b < b1; ++b) {
    uint32_t* block = out + b * pairs * 16;
    for (int64_t p0 = 0; p0 < pairs; p0 += kPairs) {
      const int64_t np = std::min(kPairs, pairs - p0);
      for (int64_t l = 0; l < 16; ++l) {
        const int64_t m = b * 16 + l;
        for (int64_t k = 2 * p0; k < 2 * (p0 + np); k += 32) {
          // 32 values (zeros past K and M) -> 16 words of two BF16 each, in order.
          const float* row = x + (m < M ? m : 0) * ldx;
          _mm512_store_si512(words + l * kPairs + (k / 2 - p0),
                             round_bf16_32(row + k, m < M ? K - k : 0));
        }
      }
      transpose_f32_avx512(reinterpret_cast<const float*>(words), kPairs, 16, np,
                           reinterpret_cast<float*>(block + p0 * 16), 16);
    }
  }
  return {.data = out, .M = M, .K = K, .pairs = pairs};
}

namespace {

// acc[r][v] = sum over pairs of W row r against activation block v.
template <int NR, int V>
SSM_TARGET_BF16 inline __attribute__((always_inline)) void bf16_sums(const uint32_t* xb,
                                                                     int64_t pairs,
                                                                     const uint16_t* W, int64_t K,
                                                                     __m512 (&acc)[NR][V]) {
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
}

// The sums stored to tile[r * 64 + 16 v + lane], for the loop's writer.
template <int NR, int V>
SSM_TARGET_BF16 void bf16_tile(const uint32_t* xb, int64_t pairs, const uint16_t* W, int64_t K,
                               float* tile) {
  __m512 acc[NR][V];
  bf16_sums<NR, V>(xb, pairs, W, K, acc);
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(tile + r * 64 + v * 16, acc[r][v]);
}

// A whole tile written into y by vectors (x86_gemm_writer.h).
template <int V>
SSM_TARGET_BF16 void bf16_tile_to_y(const uint32_t* xb, int64_t pairs, const uint16_t* W,
                                    int64_t K, float* y, int64_t ldy, const float* bias,
                                    bool accumulate) {
  __m512 acc[kGemmTileRows][V];
  bf16_sums<kGemmTileRows, V>(xb, pairs, W, K, acc);
  store_tile_to_y<V>(acc, y, ldy, bias, accumulate);
}

}  // namespace

void bf16_gemm_avx512(const Bf16PackedRows& x, const Bf16GemmJob& job) {
  const int64_t K = x.K, pairs = x.pairs;
  const GemmTileOutput out{
      .n = job.n, .bias = job.bias, .accumulate = job.accumulate, .y = job.y, .ldy = job.ldy};
  for_each_gemm_tile(x.M, out, [&](int vectors, int64_t b0, int64_t j0, int rows, float* sums) {
    const uint32_t* xb = x.data + b0 * pairs * 16;
    const uint16_t* W = job.W + j0 * K;
    const bool whole = rows == kGemmTileRows && (b0 + vectors) * 16 <= x.M;
    with_tile_vectors(vectors, [&](auto v) {
      constexpr int V = decltype(v)::value;
      if (whole)
        bf16_tile_to_y<V>(xb, pairs, W, K, job.y + b0 * 16 * job.ldy + j0, job.ldy,
                          job.bias ? job.bias + j0 : nullptr, job.accumulate);
      else if (rows == kGemmTileRows)
        bf16_tile<kGemmTileRows, V>(xb, pairs, W, K, sums);
      else
        for (int r = 0; r < rows; ++r) bf16_tile<1, V>(xb, pairs, W + r * K, K, sums + r * 64);
    });
    return whole;
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

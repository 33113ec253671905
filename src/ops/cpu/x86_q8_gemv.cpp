// Q8 matrix-vector products with AVX-512 VNNI. vpdpbusd multiplies unsigned
// by signed bytes, so each weight vector is made unsigned once (w + 128, an
// xor of the sign bit) and the activations stay signed; the extra
// 128 * sum(x) is the same for every weight row and is subtracted once per
// output (Q8Activations::bias128). Products of a block of kQ8ActBlock values
// sum exactly in int32 lanes and are scaled to F32 at the end of the block.
#include <algorithm>
#include <cmath>

#include "ops/cpu/stream_prefetch.h"
#include "ops/cpu/x86_intrinsics.h"
#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {

Q8Activations quantize_q8_rows(const float* x, int64_t ldx, int64_t M, int64_t K, void* workspace) {
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23
  Q8Activations a;
  a.M = M;
  a.Kp = q8_padded_width(K);
  a.blocks = q8_act_blocks(K);
  auto* q = static_cast<int8_t*>(workspace);
  auto* scales = reinterpret_cast<float*>(q + M * a.Kp);
  float* bias128 = scales + M * a.blocks;
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    int8_t* qr = q + m * a.Kp;
    float corr = 0.f;
    for (int64_t b = 0; b < a.blocks; ++b) {
      const int64_t lo = b * kQ8ActBlock, hi = std::min(K, lo + kQ8ActBlock);
      float amax = 0.f;
      for (int64_t k = lo; k < hi; ++k) amax = std::max(amax, std::fabs(xr[k]));
      const float scale = amax / 127.f, inv = amax > 0.f ? 127.f / amax : 0.f;
      int32_t sum = 0;
      for (int64_t k = lo; k < hi; ++k) {
        // Round to nearest even without a libm call per value (it was a
        // visible share of a decode step): |x * inv| <= 127 < 2^22, where
        // adding and taking away 1.5 * 2^23 rounds exactly as rint does.
        const auto v = static_cast<int32_t>((xr[k] * inv + kRound) - kRound);
        qr[k] = static_cast<int8_t>(std::clamp(v, -127, 127));
        sum += qr[k];
      }
      scales[m * a.blocks + b] = scale;
      corr += scale * static_cast<float>(sum);
    }
    std::fill(qr + K, qr + a.Kp, int8_t{0});
    bias128[m] = 128.f * corr;
  }
  a.q = q;
  a.scales = scales;
  a.bias128 = bias128;
  return a;
}

#if defined(__x86_64__)
bool cpu_has_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
}

namespace {

#define SSM_ALWAYS_INLINE inline __attribute__((always_inline))

// Activation rows per pass over a weight row: G x 3 registers of sums (two
// int32 block sums and an F32 total each) plus the weight and activation
// vectors fit the 32 vector registers.
constexpr int64_t kQ8MaxRows = 8;

// t[g] += the products of 64 weights (from column k) with activation row
// m0 + g. vpdpbusd takes unsigned weights: w + 128, an xor of the sign bit.
template <int G>
SSM_TARGET_VNNI SSM_ALWAYS_INLINE void q8_add(const Q8Activations& xq, int64_t m0, int64_t k,
                                              __m512i wv, __m512i (&t)[G]) {
  wv = _mm512_xor_si512(wv, _mm512_set1_epi8(static_cast<char>(0x80)));
  for (int g = 0; g < G; ++g)
    t[g] = _mm512_dpbusd_epi32(t[g], wv, _mm512_loadu_si512(xq.q + (m0 + g) * xq.Kp + k));
}

// Weight row j against G activation rows (from m0). The weight rows are read
// one after another, in address order: one sequential stream, each line also
// asked for kStreamPrefetchBytes ahead (on the Intel host of 2026-12-07 the
// hardware prefetchers alone kept it at 82-85% of a streaming read). Reading four rows side by side
// (four short streams, software-prefetched one group ahead) reached
// 64-76% of a streaming read of the same bytes on one Zen 5 core against
// 82-84% this way (batch 1), and at 8 activation rows it also reloaded and
// flipped each weight vector once per pair of activation rows: 32-44%
// against 57-58% (docs/CPU.md, "Decode matrix-vector kernels against a
// streaming read"). Every sum is formed as before (int32 block sums, exact,
// scaled per block in block order), so the results are the same bits.
template <int G>
SSM_TARGET_VNNI SSM_ALWAYS_INLINE void q8_row(const Q8Activations& xq, int64_t m0,
                                              const Q8GemvJob& job, int64_t j) {
  const int64_t K = job.K;
  const int8_t* w = job.W + j * K;
  __m512 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < xq.blocks; ++b) {
    __m512i t[G];
    for (int g = 0; g < G; ++g) t[g] = _mm512_setzero_si512();
    int64_t k = b * kQ8ActBlock;
    static_assert(kQ8ActBlock == 128);
    if (k + 128 <= K) {  // a whole block: two vectors, the loop unrolled
      // Its two lines of weights, 4 KiB ahead (the rows' last partial
      // blocks are left to the hardware prefetchers).
      prefetch_stream_ahead(w + k);
      prefetch_stream_ahead(w + k + 64);
      if constexpr (G <= 2) {
        // The halves summed apart: two independent chains for one or two
        // rows of activations (int32, exact).
        __m512i u[G];
        for (int g = 0; g < G; ++g) u[g] = _mm512_setzero_si512();
        q8_add<G>(xq, m0, k, _mm512_loadu_si512(w + k), t);
        q8_add<G>(xq, m0, k + 64, _mm512_loadu_si512(w + k + 64), u);
        for (int g = 0; g < G; ++g) t[g] = _mm512_add_epi32(t[g], u[g]);
      } else {
        // G chains are enough to overlap: one sum each, which saves G adds
        // per block (at 8 rows the per-block work beside the byte products
        // bounded the kernel). The same int32 sums either way.
        q8_add<G>(xq, m0, k, _mm512_loadu_si512(w + k), t);
        q8_add<G>(xq, m0, k + 64, _mm512_loadu_si512(w + k + 64), t);
      }
    } else {
      for (; k + 64 <= K; k += 64) q8_add<G>(xq, m0, k, _mm512_loadu_si512(w + k), t);
      // The row's last bytes: the rest read as 0 (then 128), against
      // activations padded with zeros.
      if (k < K)
        q8_add<G>(xq, m0, k, _mm512_maskz_loadu_epi8((uint64_t{1} << (K - k)) - 1, w + k), t);
    }
    for (int g = 0; g < G; ++g)
      acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[g]),
                               _mm512_set1_ps(xq.scales[(m0 + g) * xq.blocks + b]), acc[g]);
  }
  const float ws = job.wscale[j * job.wscale_stride];
  const float bias = job.bias ? job.bias[j] : 0.f;
  for (int g = 0; g < G; ++g) {
    float& out = job.y[(m0 + g) * job.ldy + j];
    const float v = ws * (_mm512_reduce_add_ps(acc[g]) - xq.bias128[m0 + g]) + bias;
    out = job.accumulate ? out + v : v;
  }
}

template <int G>
SSM_TARGET_VNNI void q8_all_rows(const Q8Activations& xq, int64_t m0, const Q8GemvJob& job) {
  for (int64_t j = 0; j < job.n; ++j) q8_row<G>(xq, m0, job, j);
}

}  // namespace

SSM_TARGET_VNNI void q8_gemv_vnni(const Q8Activations& xq, const Q8GemvJob& job) {
  // Batches past kQ8MaxRows rows pass over the weights once per group of
  // rows (linear() sends at most 8 here).
  using RowGroup = void (*)(const Q8Activations&, int64_t, const Q8GemvJob&);
  // Entry g - 1 takes g activation rows in one pass.
  static constexpr RowGroup kRowGroups[kQ8MaxRows] = {&q8_all_rows<1>, &q8_all_rows<2>, &q8_all_rows<3>,
                                                      &q8_all_rows<4>, &q8_all_rows<5>, &q8_all_rows<6>,
                                                      &q8_all_rows<7>, &q8_all_rows<8>};
  for (int64_t m0 = 0; m0 < xq.M; m0 += kQ8MaxRows)
    kRowGroups[std::min(kQ8MaxRows, xq.M - m0) - 1](xq, m0, job);
}
#else
bool cpu_has_avx512_vnni() { return false; }
void q8_gemv_vnni(const Q8Activations&, const Q8GemvJob&) {}
#endif

}  // namespace ssm::cpu

// Q8 matrix-vector products with AVX-512 VNNI. vpdpbusd multiplies unsigned
// by signed bytes, so each weight vector is made unsigned once (w + 128, an
// xor of the sign bit) and the activations stay signed; the extra
// 128 * sum(x) is the same for every weight row and is subtracted once per
// output (Q8Activations::bias128). Products of a block of kQ8ActBlock values
// sum exactly in int32 lanes and are scaled to F32 at the end of the block.
#include <algorithm>
#include <cmath>

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

// R weight rows (from j0) against G activation rows (from m0): R x G F32
// accumulators, R x G int32 block sums, R weight vectors: at most 22 of the
// 32 vector registers for R = 4, G = 2.
template <int R, int G>
SSM_TARGET_VNNI void q8_tile(const Q8Activations& xq, int64_t m0, const Q8GemvJob& job,
                             int64_t j0) {
  const int64_t K = job.K;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const int8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = job.W + (j0 + r) * K;
  __m512 acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < xq.blocks; ++b) {
    __m512i t[R][G];
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) t[r][g] = _mm512_setzero_si512();
    const int64_t k_end = std::min(K, (b + 1) * kQ8ActBlock);
    for (int64_t k = b * kQ8ActBlock; k < k_end; k += 64) {
      __m512i wv[R];
      // The next rows' line at this column (see lowp_linear.cpp's
      // prefetch_ahead: rows read side by side are short streams).
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(w[r]) + (R * K + k)),
                     _MM_HINT_T0);
      if (k + 64 <= K) {
        for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_si512(w[r] + k);
      } else {
        // The row's last bytes: the rest read as 0 (then 128), against
        // activations padded with zeros.
        const __mmask64 mask = (uint64_t{1} << (K - k)) - 1;
        for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_epi8(mask, w[r] + k);
      }
      for (int r = 0; r < R; ++r) wv[r] = _mm512_xor_si512(wv[r], flip);
      for (int g = 0; g < G; ++g) {
        const __m512i xv = _mm512_loadu_si512(xq.q + (m0 + g) * xq.Kp + k);
        for (int r = 0; r < R; ++r) t[r][g] = _mm512_dpbusd_epi32(t[r][g], wv[r], xv);
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 s = _mm512_set1_ps(xq.scales[(m0 + g) * xq.blocks + b]);
      for (int r = 0; r < R; ++r)
        acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[r][g]), s, acc[r][g]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const int64_t j = j0 + r;
    const float ws = job.wscale[j * job.wscale_stride];
    const float bias = job.bias ? job.bias[j] : 0.f;
    for (int g = 0; g < G; ++g) {
      float& out = job.y[(m0 + g) * job.ldy + j];
      const float v = ws * (_mm512_reduce_add_ps(acc[r][g]) - xq.bias128[m0 + g]) + bias;
      out = job.accumulate ? out + v : v;
    }
  }
}

template <int R>
SSM_TARGET_VNNI void q8_rows(const Q8Activations& xq, const Q8GemvJob& job, int64_t j0) {
  int64_t m = 0;
  for (; m + 2 <= xq.M; m += 2) q8_tile<R, 2>(xq, m, job, j0);
  if (m < xq.M) q8_tile<R, 1>(xq, m, job, j0);
}

}  // namespace

SSM_TARGET_VNNI void q8_gemv_vnni(const Q8Activations& xq, const Q8GemvJob& job) {
  int64_t j = 0;
  for (; j + 4 <= job.n; j += 4) q8_rows<4>(xq, job, j);
  for (; j < job.n; ++j) q8_rows<1>(xq, job, j);
}
#else
bool cpu_has_avx512_vnni() { return false; }
void q8_gemv_vnni(const Q8Activations&, const Q8GemvJob&) {}
#endif

}  // namespace ssm::cpu

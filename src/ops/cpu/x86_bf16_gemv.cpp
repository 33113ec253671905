// BF16 matrix-vector products for decoding (at most 8 activation rows) with
// vdpbf16ps. The activations are rounded to BF16 once per call (as the
// prefill product rounds them); each instruction then multiplies 32 weights
// by 32 activations and adds the pairs into 16 F32 sums. The widening kernel
// of lowp_linear.cpp takes two FMAs and two integer operations for the same
// 32 products, and at 8 rows that arithmetic, not memory, bounded a step: a
// core of the Zen 5 host runs about 2.2 G 512-bit FMAs or vdpbf16ps a second
// (docs/CPU.md, "Batched decode (helper cpu-batch8 ...)").
#include <algorithm>

#include "ops/cpu/stream_prefetch.h"
#include "ops/cpu/x86_bf16_round.h"
#include "ops/cpu/x86_intrinsics.h"
#include "ops/cpu/x86_kernels.h"

namespace ssm::cpu {

#if defined(__x86_64__)
namespace {

#define SSM_ALWAYS_INLINE inline __attribute__((always_inline))

// Activation rows per pass over a weight row: 2 x G sums and two weight
// vectors in registers, the activations read from L1 as operands.
constexpr int64_t kBf16GemvMaxRows = 8;

// Weight row j against G rounded activation rows (from m0). The weight rows
// are read one after another in address order (one stream, as the int8
// kernel reads them), each line also asked for kStreamPrefetchBytes ahead.
// Each sum is formed the same way for every G: two chains (even and odd
// 32-element steps, so that one row alone still has two multiply-adds in
// flight), the tail into the first, the chains added and reduced; so a row's
// result does not depend on the batch it is in.
template <int G>
SSM_TARGET_BF16 SSM_ALWAYS_INLINE void bf16_row(const Bf16GemvRows& xb, int64_t m0,
                                                const Bf16GemvJob& job, int64_t j) {
  const int64_t K = job.K;
  const uint16_t* w = job.W + j * K;
  const uint16_t* xs[G];
  for (int g = 0; g < G; ++g) xs[g] = xb.data + (m0 + g) * xb.width;
  __m512 a[G], b[G];
  for (int g = 0; g < G; ++g) a[g] = b[g] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    // The two lines of weights this step reads, 4 KiB ahead.
    prefetch_stream_ahead(w + k);
    prefetch_stream_ahead(w + k + 32);
    const __m512bh w0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + k));
    const __m512bh w1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + k + 32));
    for (int g = 0; g < G; ++g) {
      a[g] = _mm512_dpbf16_ps(a[g], w0, reinterpret_cast<__m512bh>(_mm512_loadu_si512(xs[g] + k)));
      b[g] = _mm512_dpbf16_ps(b[g], w1,
                              reinterpret_cast<__m512bh>(_mm512_loadu_si512(xs[g] + k + 32)));
    }
  }
  // The row's last elements (fewer than 64): weights past K read as zeros,
  // against activations padded with zeros to the rows' width.
  for (; k < K; k += 32) {
    const int64_t left = K - k;
    const __mmask32 mask = left >= 32 ? ~__mmask32{0} : (__mmask32{1} << left) - 1;
    const __m512bh wv = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask, w + k));
    for (int g = 0; g < G; ++g)
      a[g] = _mm512_dpbf16_ps(a[g], wv, reinterpret_cast<__m512bh>(_mm512_loadu_si512(xs[g] + k)));
  }
  const float bias = job.bias ? job.bias[j] : 0.f;
  for (int g = 0; g < G; ++g) {
    float& out = job.y[(m0 + g) * job.ldy + j];
    const float v = _mm512_reduce_add_ps(_mm512_add_ps(a[g], b[g])) + bias;
    out = job.accumulate ? out + v : v;
  }
}

template <int G>
SSM_TARGET_BF16 void bf16_all_rows(const Bf16GemvRows& xb, int64_t m0, const Bf16GemvJob& job) {
  for (int64_t j = 0; j < job.n; ++j) bf16_row<G>(xb, m0, job, j);
}

}  // namespace

SSM_TARGET_BF16 Bf16GemvRows round_bf16_rows(const float* x, int64_t ldx, int64_t M, int64_t K,
                                             void* workspace) {
  const Bf16GemvRows rows{.data = static_cast<const uint16_t*>(workspace),
                          .M = M,
                          .width = bf16_gemv_width(K)};
  auto* out = static_cast<uint16_t*>(workspace);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    uint16_t* o = out + m * rows.width;
    // Zeros past K.
    for (int64_t k = 0; k < rows.width; k += 32)
      _mm512_storeu_si512(o + k, round_bf16_32(xr + k, K - k));
  }
  return rows;
}

SSM_TARGET_BF16 void bf16_gemv_avx512(const Bf16GemvRows& xb, const Bf16GemvJob& job) {
  // Batches past kBf16GemvMaxRows rows pass over the weights once per group
  // of rows (linear() sends at most 8 here).
  using RowGroup = void (*)(const Bf16GemvRows&, int64_t, const Bf16GemvJob&);
  // Entry g - 1 takes g activation rows in one pass.
  static constexpr RowGroup kRowGroups[kBf16GemvMaxRows] = {
      &bf16_all_rows<1>, &bf16_all_rows<2>, &bf16_all_rows<3>, &bf16_all_rows<4>,
      &bf16_all_rows<5>, &bf16_all_rows<6>, &bf16_all_rows<7>, &bf16_all_rows<8>};
  for (int64_t m0 = 0; m0 < xb.M; m0 += kBf16GemvMaxRows)
    kRowGroups[std::min(kBf16GemvMaxRows, xb.M - m0) - 1](xb, m0, job);
}
#else
Bf16GemvRows round_bf16_rows(const float*, int64_t, int64_t, int64_t, void*) { return {}; }
void bf16_gemv_avx512(const Bf16GemvRows&, const Bf16GemvJob&) {}
#endif

}  // namespace ssm::cpu

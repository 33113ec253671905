// Activations rounded to BF16 for the vdpbf16ps kernels (x86_bf16_gemv.cpp,
// x86_bf16_gemm.cpp): both round the same way, 32 values at a time.
#pragma once

#include <cstdint>

#include "ops/cpu/x86_intrinsics.h"

namespace ssm::cpu {

#if defined(__x86_64__)
// The 32 floats from p rounded to BF16, nearest even, in order, as 16 words
// of two values each; values from index `left` on (0 to 32) read as zeros.
SSM_TARGET_BF16 inline __m512i round_bf16_32(const float* p, int64_t left) {
  const __mmask16 lo_mask = left >= 16  ? 0xFFFF
                            : left <= 0 ? 0
                                        : static_cast<__mmask16>((1u << left) - 1);
  const __mmask16 hi_mask = left >= 32   ? 0xFFFF
                            : left <= 16 ? 0
                                         : static_cast<__mmask16>((1u << (left - 16)) - 1);
  const __m512 lo = _mm512_maskz_loadu_ps(lo_mask, p);
  const __m512 hi = _mm512_maskz_loadu_ps(hi_mask, p + 16);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}
#endif

}  // namespace ssm::cpu

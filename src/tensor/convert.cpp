// Conversions between the stored formats and F32. They run once per weight
// at load time, so they are compiled for the baseline target: runtime
// dispatch would buy nothing. Widening is exact (Highway); narrowing rounds
// to nearest even in plain integer code.
#include "ssm/tensor/convert.h"

#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ssm {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

template <typename Narrow>
void widen(const void* in, float* out, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<Narrow, decltype(df)> dn;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto* src = static_cast<const Narrow*>(in);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dn, src + i)), df, out + i);
  if (i < n) {
    const hn::CappedTag<float, 1> d1;
    const hn::Rebind<Narrow, decltype(d1)> dn1;
    for (; i < n; ++i) hn::StoreU(hn::PromoteTo(d1, hn::LoadU(dn1, src + i)), d1, out + i);
  }
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest, ties to even, as PyTorch's .to(torch.bfloat16) does:
// Highway's DemoteTo (Debian's version) truncates, which pulls every weight
// towards zero. NaN stays a (quiet) NaN instead of rounding into infinity.
uint16_t bf16_nearest(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Round to nearest, ties to even, with IEEE half's subnormals, overflow to
// infinity from 65520 up, and NaN kept quiet. Normal results add half an
// ulp of the half format (minus one, plus the kept bit's parity) before the
// cut; subnormal results let one float addition round at the half's
// subnormal spacing by aligning the value against a power of two.
uint16_t f16_nearest(float f) {
  uint32_t u = bits_of(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u >= 0x47800000u)  // 65536 and up, infinities, NaN
    return static_cast<uint16_t>(sign | (u > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (u < 0x38800000u) {  // below 2^-14: a subnormal half (or zero)
    constexpr uint32_t kAlign = 126u << 23;  // 0.5: its ulp is the half's 2^-24
    return static_cast<uint16_t>(sign | (bits_of(float_of(u) + float_of(kAlign)) - kAlign));
  }
  u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u);
  return static_cast<uint16_t>(sign | (u >> 13));
}

// Exact, NaN and infinity included (Highway's emulated PromoteTo, the
// baseline target's, turns NaN halves into infinities). Subnormal halves
// are m * 2^-24, exact in float.
float f16_value(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float m = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -m : m;
  }
  if (exponent == 31) return float_of(sign | 0x7f800000u | mantissa << 13);
  return float_of(sign | (exponent + 112) << 23 | mantissa << 13);
}

template <uint16_t (*Round)(float)>
void narrow(const float* in, void* out, int64_t n) {
  auto* dst = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) dst[i] = Round(in[i]);
}

}  // namespace

// A file's tensor data need not be 2-byte aligned (safetensors puts it
// wherever its header ends), so each half is copied out, not dereferenced.
void f16_to_f32(const void* in, float* out, int64_t n) {
  const auto* src = static_cast<const unsigned char*>(in);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, sizeof h);
    out[i] = f16_value(h);
  }
}
void bf16_to_f32(const void* in, float* out, int64_t n) { widen<hwy::bfloat16_t>(in, out, n); }
void f32_to_f16(const float* in, void* out, int64_t n) { narrow<f16_nearest>(in, out, n); }
void f32_to_bf16(const float* in, void* out, int64_t n) { narrow<bf16_nearest>(in, out, n); }

}  // namespace ssm

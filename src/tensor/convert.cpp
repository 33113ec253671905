// Highway's portable conversions, compiled for the baseline target: these run
// once per weight at load time, so runtime dispatch would buy nothing.
#include "ssm/tensor/convert.h"

#include <hwy/highway.h>

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

template <typename Narrow>
void narrow(const float* in, void* out, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<Narrow, decltype(df)> dn;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  auto* dst = static_cast<Narrow*>(out);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::DemoteTo(dn, hn::LoadU(df, in + i)), dn, dst + i);
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<Narrow, decltype(d1)> dn1;
  for (; i < n; ++i) hn::StoreU(hn::DemoteTo(dn1, hn::LoadU(d1, in + i)), dn1, dst + i);
}

}  // namespace

void f16_to_f32(const void* in, float* out, int64_t n) { widen<hwy::float16_t>(in, out, n); }
void bf16_to_f32(const void* in, float* out, int64_t n) { widen<hwy::bfloat16_t>(in, out, n); }
void f32_to_f16(const float* in, void* out, int64_t n) { narrow<hwy::float16_t>(in, out, n); }
void f32_to_bf16(const float* in, void* out, int64_t n) { narrow<hwy::bfloat16_t>(in, out, n); }

}  // namespace ssm

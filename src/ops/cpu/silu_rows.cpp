// Kernels of silu_rows.h, compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/silu_rows.cpp"
// The order matters: foreach_target.h, then highway.h, then the per-target
// math header.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
#include "ops/cpu/partial_vectors-inl.h"
// clang-format on

#include "ops/cpu/silu_rows.h"

#include <algorithm>

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SiluInPlace(float* v, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const auto one = hn::Set(df, 1.f);
  auto silu = [&](hn::Vec<decltype(df)> x) {
    return hn::Div(x, hn::Add(one, hn::Exp(df, hn::Neg(x))));
  };
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(silu(hn::LoadU(df, v + i)), df, v + i);
  if (i < n) {
    // The tail through a full vector, so that it gets the same arithmetic.
    store_part(df, silu(load_part(df, v + i, n - i)), v + i, n - i);
  }
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(SiluInPlace);

void silu_in_place(float* v, int64_t n) { HWY_DYNAMIC_DISPATCH(SiluInPlace)(v, n); }

}  // namespace ssm::cpu
#endif  // HWY_ONCE

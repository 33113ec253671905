// Kernels of mamba3_step_scalars.h, compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/mamba3_step_scalars.cpp"
// The order matters: foreach_target.h, then highway.h, then the per-target
// math header.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include "ops/cpu/mamba3_step_scalars.h"

#include <algorithm>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void StepScalars(float* dt, float* A, float* lam, int64_t n, float dt_bias, float A_floor) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto zero = hn::Zero(d), one = hn::Set(d, 1.f), bias = hn::Set(d, dt_bias);
  const auto big = hn::Set(d, 20.f), small = hn::Set(d, -20.f), floor = hn::Set(d, -A_floor);
  auto lanes = [&](float* pdt, float* pA, float* plam) {
    // softplus: x past 20 as it is, below -20 e^x (log1p would lose it).
    const auto x = hn::Add(hn::LoadU(d, pdt), bias);
    const auto ex = hn::Exp(d, hn::Min(x, big));
    const auto sp = hn::IfThenElse(hn::Lt(x, small), ex, hn::Log1p(d, ex));
    hn::StoreU(hn::IfThenElse(hn::Gt(x, big), x, sp), d, pdt);
    // -heavy_tail(v), no larger than -A_floor.
    const auto v = hn::LoadU(d, pA);
    const auto tail = hn::IfThenElse(hn::Ge(v, zero), hn::Add(one, v), hn::Div(one, hn::Sub(one, v)));
    hn::StoreU(hn::Min(hn::Neg(tail), floor), d, pA);
    // sigmoid from e^-|x|: 1 / (1 + e) for x >= 0, e / (1 + e) below.
    const auto t = hn::LoadU(d, plam);
    const auto e = hn::Exp(d, hn::Neg(hn::Abs(t)));
    const auto inv = hn::Div(one, hn::Add(one, e));
    hn::StoreU(hn::IfThenElse(hn::Ge(t, zero), inv, hn::Mul(e, inv)), d, plam);
  };
  int64_t i = 0;
  for (; i + L <= n; i += L) lanes(dt + i, A + i, lam + i);
  if (i < n) {
    // The tail through full vectors, so that it gets the same arithmetic.
    constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
    HWY_ALIGN float bdt[kMax] = {}, bA[kMax] = {}, blam[kMax] = {};
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(bdt, dt + i, bytes);
    std::memcpy(bA, A + i, bytes);
    std::memcpy(blam, lam + i, bytes);
    lanes(bdt, bA, blam);
    std::memcpy(dt + i, bdt, bytes);
    std::memcpy(A + i, bA, bytes);
    std::memcpy(lam + i, blam, bytes);
  }
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(StepScalars);

void mamba3_step_scalars(float* dt, float* A, float* lam, int64_t n, float dt_bias, float A_floor) {
  HWY_DYNAMIC_DISPATCH(StepScalars)(dt, A, lam, n, dt_bias, A_floor);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

// Kernels of vec_backward.h, compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/vec_backward.cpp"
// The order matters: foreach_target.h, then highway.h, then the per-target
// math header.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include "ops/cpu/vec_backward.h"

#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void MulSiluGrad(const float* pre, float* g, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(d, 1.f);
  auto step = [&](const float* p, float* out) {
    const auto x = hn::LoadU(d, p);
    const auto s = hn::Div(one, hn::Add(one, hn::Exp(d, hn::Neg(x))));
    const auto grad = hn::Mul(s, hn::MulAdd(x, hn::Sub(one, s), one));
    hn::StoreU(hn::Mul(hn::LoadU(d, out), grad), d, out);
  };
  int64_t i = 0;
  for (; i + L <= n; i += L) step(pre + i, g + i);
  if (i < n) {  // the tail through one full vector
    HWY_ALIGN float p[HWY_MAX_BYTES / sizeof(float)] = {};
    HWY_ALIGN float o[HWY_MAX_BYTES / sizeof(float)] = {};
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(p, pre + i, bytes);
    std::memcpy(o, g + i, bytes);
    step(p, o);
    std::memcpy(g + i, o, bytes);
  }
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(MulSiluGrad);

void mul_silu_grad(const float* pre, float* g, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MulSiluGrad)(pre, g, n);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

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

#include <cmath>
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

void SiluGateBackward(const float* y, const float* z, const float* g, float* dy, float* dz,
                      int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(d, 1.f);
  auto step = [&](const float* vy, const float* vz, const float* vg, float* ody, float* odz) {
    const auto x = hn::LoadU(d, vz), grad_out = hn::LoadU(d, vg);
    const auto s = hn::Div(one, hn::Add(one, hn::Exp(d, hn::Neg(x))));
    hn::StoreU(hn::Mul(grad_out, hn::Mul(x, s)), d, ody);
    const auto silu_grad = hn::Mul(s, hn::MulAdd(x, hn::Sub(one, s), one));
    hn::StoreU(hn::Mul(hn::Mul(grad_out, hn::LoadU(d, vy)), silu_grad), d, odz);
  };
  int64_t i = 0;
  for (; i + L <= n; i += L) step(y + i, z + i, g + i, dy + i, dz + i);
  if (i < n) {  // the tail through one full vector
    HWY_ALIGN float b[5][HWY_MAX_BYTES / sizeof(float)] = {};
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(b[0], y + i, bytes);
    std::memcpy(b[1], z + i, bytes);
    std::memcpy(b[2], g + i, bytes);
    step(b[0], b[1], b[2], b[3], b[4]);
    std::memcpy(dy + i, b[3], bytes);
    std::memcpy(dz + i, b[4], bytes);
  }
}

// The scalar form, for the tail and for targets without double lanes.
inline void adamw_scalar(const AdamwConstants& k, float& p, float g, float& m, float& v) {
  m = static_cast<float>(k.b1 * m + (1.0 - k.b1) * g);
  v = static_cast<float>(k.b2 * v + (1.0 - k.b2) * static_cast<double>(g) * g);
  const auto bc1 = static_cast<float>(k.bc1), bc2 = static_cast<float>(k.bc2),
             eps = static_cast<float>(k.eps);
  const float update = (m / bc1) / (std::sqrt(v / bc2) + eps);
  p = static_cast<float>(p * k.decay - k.lr * static_cast<double>(update));
}

void AdamwUpdate(const AdamwConstants& k, float* p, const float* g, float* m, float* v, int64_t n) {
  int64_t i = 0;
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(dd));
  const auto b1 = hn::Set(dd, k.b1), c1 = hn::Set(dd, 1.0 - k.b1), b2 = hn::Set(dd, k.b2),
             c2 = hn::Set(dd, 1.0 - k.b2), decay = hn::Set(dd, k.decay), lr = hn::Set(dd, k.lr);
  const auto bc1 = hn::Set(df, static_cast<float>(k.bc1)),
             bc2 = hn::Set(df, static_cast<float>(k.bc2)),
             eps = hn::Set(df, static_cast<float>(k.eps));
  for (; i + L <= n; i += L) {
    const auto vg = hn::PromoteTo(dd, hn::LoadU(df, g + i));
    const auto mf = hn::DemoteTo(
        df, hn::Add(hn::Mul(b1, hn::PromoteTo(dd, hn::LoadU(df, m + i))), hn::Mul(c1, vg)));
    const auto vf = hn::DemoteTo(df, hn::Add(hn::Mul(b2, hn::PromoteTo(dd, hn::LoadU(df, v + i))),
                                             hn::Mul(hn::Mul(c2, vg), vg)));
    hn::StoreU(mf, df, m + i);
    hn::StoreU(vf, df, v + i);
    const auto update =
        hn::PromoteTo(dd, hn::Div(hn::Div(mf, bc1), hn::Add(hn::Sqrt(hn::Div(vf, bc2)), eps)));
    const auto vp = hn::PromoteTo(dd, hn::LoadU(df, p + i));
    hn::StoreU(hn::DemoteTo(df, hn::Sub(hn::Mul(vp, decay), hn::Mul(lr, update))), df, p + i);
  }
#endif
  for (; i < n; ++i) adamw_scalar(k, p[i], g[i], m[i], v[i]);
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(MulSiluGrad);
HWY_EXPORT(SiluGateBackward);
HWY_EXPORT(AdamwUpdate);

void adamw_update(const AdamwConstants& k, float* p, const float* g, float* m, float* v,
                  int64_t n) {
  HWY_DYNAMIC_DISPATCH(AdamwUpdate)(k, p, g, m, v, n);
}

void mul_silu_grad(const float* pre, float* g, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MulSiluGrad)(pre, g, n);
}

void silu_gate_backward(const float* y, const float* z, const float* g, float* dy, float* dz,
                        int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluGateBackward)(y, z, g, dy, dz, n);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

// selective_scan_block.h, compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/selective_scan_block.cpp"
// The order matters: foreach_target.h, then highway.h, then the per-target
// math header.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include "ops/cpu/selective_scan_block.h"

#include <algorithm>
#include <cmath>

#include "ops/tensor_data.h"

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(v), flushed to 0 below -80 (the decay of a state, or a softplus far
// below zero: both negligible there, and the vector exp is not meant for
// arguments far below its range).
template <class D>
HWY_INLINE hn::Vec<D> exp_flushed(D d, hn::Vec<D> v) {
  return hn::IfThenZeroElse(hn::Lt(v, hn::Set(d, -80.f)), hn::Exp(d, v));
}

// ops::softplus lane-wise: v above 20, exp(v) below -20, log1p(exp(v)) between.
template <class D>
HWY_INLINE hn::Vec<D> softplus(D d, hn::Vec<D> v) {
  const auto e = exp_flushed(d, hn::Min(v, hn::Set(d, 20.f)));
  const auto mid = hn::Log1p(d, e);
  return hn::IfThenElse(hn::Gt(v, hn::Set(d, 20.f)), v,
                        hn::IfThenElse(hn::Lt(v, hn::Set(d, -20.f)), e, mid));
}

// The channels are the lanes: per step, the block's w inputs are copied into
// buffers of kScanBlock lanes (zeros past w, whose results are dropped), and
// every state S[n] of the block is a row of kScanBlock lanes.
void SelectiveScanBlock(const ops::SelectiveScanArgs& a, int64_t b, int64_t d0, int64_t d1) {
  const hn::ScalableTag<float> d;
  constexpr int64_t W = kScanBlock;
  const auto V = static_cast<int64_t>(hn::Lanes(d));
  const int64_t L = a.x.dim(1), D = a.x.cols(), N = a.A_log.dim(1), w = d1 - d0;
  const ops::Rows<const float> x(a.x), dt_raw(a.dt_raw), Bm(a.B), Cm(a.C);
  const ops::Rows<float> y(a.y);
  const float* dt_bias = ops::elements_or_null<const float>(a.dt_bias);
  const float* Dskip = ops::elements_or_null<const float>(a.D);
  const float* A_log = a.A_log.data<float>();
  float* state = ops::elements_or_null<float>(a.state);
  const bool gate = a.z.defined();

  HWY_ALIGN float S[kScanMaxN * W], A[kScanMaxN * W];
  HWY_ALIGN float bias[W] = {}, skip[W] = {}, dt_in[W] = {}, u_in[W] = {}, z_in[W] = {}, out[W];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < W; ++j) {
      const bool real = j < w;
      A[n * W + j] = real ? -std::exp(A_log[(d0 + j) * N + n]) : 0.f;
      S[n * W + j] = real && state ? state[(b * D + d0 + j) * N + n] : 0.f;
    }
  for (int64_t j = 0; j < w; ++j) {
    bias[j] = dt_bias ? dt_bias[d0 + j] : 0.f;
    skip[j] = Dskip ? Dskip[d0 + j] : 0.f;
  }
  const auto one = hn::Set(d, 1.f), cap = hn::Set(d, 80.f);
  for (int64_t t = 0; t < L; ++t) {
    const int64_t r = b * L + t;
    std::copy(dt_raw[r] + d0, dt_raw[r] + d1, dt_in);
    std::copy(x[r] + d0, x[r] + d1, u_in);
    if (gate)
      std::copy(ops::row<const float>(a.z, r) + d0, ops::row<const float>(a.z, r) + d1, z_in);
    const float* Bt = Bm[r];
    const float* Ct = Cm[r];
    for (int64_t k = 0; k < W; k += V) {
      const auto dt = softplus(d, hn::Add(hn::Load(d, dt_in + k), hn::Load(d, bias + k)));
      const auto u = hn::Load(d, u_in + k);
      const auto du = hn::Mul(dt, u);
      auto acc = hn::Zero(d);
      for (int64_t n = 0; n < N; ++n) {
        float* s = S + n * W + k;
        const auto decay = exp_flushed(d, hn::Mul(dt, hn::Load(d, A + n * W + k)));
        const auto next = hn::MulAdd(decay, hn::Load(d, s), hn::Mul(du, hn::Set(d, Bt[n])));
        hn::Store(next, d, s);
        acc = hn::MulAdd(next, hn::Set(d, Ct[n]), acc);
      }
      auto o = hn::MulAdd(hn::Load(d, skip + k), u, acc);
      if (gate) {
        const auto z = hn::Load(d, z_in + k);
        o = hn::Mul(o, hn::Div(z, hn::Add(one, hn::Exp(d, hn::Min(hn::Neg(z), cap)))));
      }
      hn::Store(o, d, out + k);
    }
    std::copy(out, out + w, y[r] + d0);
  }
  if (state)
    for (int64_t j = 0; j < w; ++j)
      for (int64_t n = 0; n < N; ++n) state[(b * D + d0 + j) * N + n] = S[n * W + j];
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(SelectiveScanBlock);

void selective_scan_block(const ops::SelectiveScanArgs& a, int64_t b, int64_t d0, int64_t d1) {
  HWY_DYNAMIC_DISPATCH(SelectiveScanBlock)(a, b, d0, d1);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

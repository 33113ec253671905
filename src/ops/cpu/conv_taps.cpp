// Kernels of conv_taps.h, compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/conv_taps.cpp"
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
#include "ops/cpu/partial_vectors-inl.h"
// clang-format on

#include "ops/cpu/conv_taps.h"


HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
HWY_INLINE hn::Vec<D> silu(D d, hn::Vec<D> x) {
  return hn::Div(x, hn::Add(hn::Set(d, 1.f), hn::Exp(d, hn::Neg(x))));
}

void ConvTapsRow(const float* const* in, const float* taps, int64_t ld_taps, const float* bias,
                 int64_t K, int64_t C, bool with_silu, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  int64_t c = 0;
  for (; c + L <= C; c += L) {
    auto acc = bias ? hn::LoadU(d, bias + c) : hn::Zero(d);
    for (int64_t k = 0; k < K; ++k)
      acc = hn::Add(acc, hn::Mul(hn::LoadU(d, taps + k * ld_taps + c), hn::LoadU(d, in[k] + c)));
    hn::StoreU(with_silu ? silu(d, acc) : acc, d, out + c);
  }
  const int64_t tail = c;
  for (; c < C; ++c) {  // the same two roundings per tap, one channel at a time
    float acc = bias ? bias[c] : 0.f;
    for (int64_t k = 0; k < K; ++k) {
      const float product = taps[k * ld_taps + c] * in[k][c];
      acc += product;
    }
    out[c] = acc;
  }
  if (with_silu && tail < C) {
    store_part(d, silu(d, load_part(d, out + tail, C - tail)), out + tail, C - tail);
  }
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(ConvTapsRow);

void conv_taps_row(const float* const* in, const float* taps, int64_t ld_taps, const float* bias,
                   int64_t K, int64_t C, bool silu, float* out) {
  HWY_DYNAMIC_DISPATCH(ConvTapsRow)(in, taps, ld_taps, bias, K, C, silu, out);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

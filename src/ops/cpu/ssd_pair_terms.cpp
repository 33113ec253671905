// Kernels of ssd_pair_terms.h, compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/ssd_pair_terms.cpp"
// The order matters: foreach_target.h, then highway.h, then the per-target
// math header.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
#include "ops/cpu/partial_vectors-inl.h"
// clang-format on

#include "ops/cpu/ssd_pair_terms.h"

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SsdDecayScores(const float* sc, int64_t ldsc, const float* cs, const float* dt, int64_t q,
                    float* M, int64_t ldm) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto zero = hn::Zero(d);
  for (int64_t t = 0; t < q; ++t) {
    const float* srow = sc + t * ldsc;
    float* mrow = M + t * ldm;
    const auto top = hn::Set(d, cs[t]);
    // Lanes at s > t: the exponent clamped to 0 (it is >= 0 there), the
    // product then replaced by 0.
    const auto diagonal = hn::Set(d, static_cast<float>(t));
    int64_t s = 0;
    for (; s <= t; s += L) {
      const int64_t count = std::min(L, q - s);
      const auto e = hn::Exp(d, hn::Min(hn::Sub(top, load_part(d, cs + s, count)), zero));
      const auto m = hn::Mul(hn::Mul(load_part(d, srow + s, count), e), load_part(d, dt + s, count));
      const auto past = hn::Gt(hn::Iota(d, static_cast<float>(s)), diagonal);
      store_part(d, hn::IfThenZeroElse(past, m), mrow + s, count);
    }
    if (s < q) std::fill(mrow + s, mrow + q, 0.f);
  }
}

void SsdDecayScoresBackward(const float* dM, const float* M, int64_t ldm, const float* sc,
                            int64_t ldsc, const double* cs, const float* dt, int64_t q,
                            double* dcs, double* ddt, float* dcb, int64_t lddcb) {
#if !HWY_HAVE_FLOAT64  // WebAssembly's SIMD128 target has no double lanes
  for (int64_t t = 0; t < q; ++t)
    for (int64_t s = 0; s <= t; ++s) {
      const double dm = dM[t * ldm + s];
      const double e = std::exp(cs[t] - cs[s]);
      const double val = dm * M[t * ldm + s];
      dcs[t] += val;
      dcs[s] -= val;
      ddt[s] += dm * sc[t * ldsc + s] * e;
      dcb[t * lddcb + s] += static_cast<float>(dm * e * dt[s]);
    }
#else
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many float lanes
  const int64_t L = static_cast<int64_t>(hn::Lanes(dd));
  const auto zero = hn::Zero(dd);
  auto widen = [&](const float* v, int64_t i, int64_t count) {
    return hn::PromoteTo(dd, load_part(df, v + i, count));
  };
  for (int64_t t = 0; t < q; ++t) {
    const float* dm_row = dM + t * ldm;
    const float* m_row = M + t * ldm;
    const float* s_row = sc + t * ldsc;
    float* dcb_row = dcb + t * lddcb;
    const auto top = hn::Set(dd, cs[t]);
    const auto diagonal = hn::Set(dd, static_cast<double>(t));
    auto row = zero;  // sum over s of v, added to dcs[t] at the end
    for (int64_t s = 0; s <= t; s += L) {
      const int64_t count = std::min(L, q - s);
      // Lanes at s > t: dm replaced by 0 and the exponent clamped to 0, so
      // that they add exact zeros.
      const auto past = hn::Gt(hn::Iota(dd, static_cast<double>(s)), diagonal);
      const auto dm = hn::IfThenZeroElse(past, widen(dm_row, s, count));
      const auto e = hn::Exp(dd, hn::Min(hn::Sub(top, load_part(dd, cs + s, count)), zero));
      const auto v = hn::Mul(dm, widen(m_row, s, count));
      row = hn::Add(row, v);
      store_part(dd, hn::Sub(load_part(dd, dcs + s, count), v), dcs + s, count);
      const auto dsc = hn::Mul(hn::Mul(dm, widen(s_row, s, count)), e);
      store_part(dd, hn::Add(load_part(dd, ddt + s, count), dsc), ddt + s, count);
      const auto dw = hn::DemoteTo(df, hn::Mul(hn::Mul(dm, e), widen(dt, s, count)));
      store_part(df, hn::Add(load_part(df, dcb_row + s, count), dw), dcb_row + s, count);
    }
    dcs[t] += hn::GetLane(hn::SumOfLanes(dd, row));
  }
#endif
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(SsdDecayScores);
HWY_EXPORT(SsdDecayScoresBackward);

void ssd_decay_scores(const float* sc, int64_t ldsc, const float* cs, const float* dt, int64_t q,
                      float* M, int64_t ldm) {
  HWY_DYNAMIC_DISPATCH(SsdDecayScores)(sc, ldsc, cs, dt, q, M, ldm);
}

void ssd_decay_scores_backward(const float* dM, const float* M, int64_t ldm, const float* sc,
                               int64_t ldsc, const double* cs, const float* dt, int64_t q,
                               double* dcs, double* ddt, float* dcb, int64_t lddcb) {
  HWY_DYNAMIC_DISPATCH(SsdDecayScoresBackward)(dM, M, ldm, sc, ldsc, cs, dt, q, dcs, ddt, dcb, lddcb);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

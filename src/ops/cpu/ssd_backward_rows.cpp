// Kernels of ssd_backward_rows.h, compiled once per Highway target (with
// -ffp-contract=off, see CMakeLists.txt: no product fused into a sum).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/ssd_backward_rows.cpp"
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on

#include "ops/cpu/ssd_backward_rows.h"

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

double SsdSkipRow(const float* dy, const float* x, float Dh, int64_t n, float* dx) {
  int64_t i = 0;
  double sum = 0;
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many float lanes
  const int64_t L = static_cast<int64_t>(hn::Lanes(dd));
  const auto dh = hn::Set(df, Dh);
  auto acc = hn::Zero(dd);
  for (; i + L <= n; i += L) {
    const auto g = hn::LoadU(df, dy + i);
    hn::StoreU(hn::Mul(dh, g), df, dx + i);
    acc = hn::Add(acc, hn::Mul(hn::PromoteTo(dd, g), hn::PromoteTo(dd, hn::LoadU(df, x + i))));
  }
  sum = hn::GetLane(hn::SumOfLanes(dd, acc));
#endif
  for (; i < n; ++i) {
    sum += static_cast<double>(dy[i]) * x[i];
    dx[i] = Dh * dy[i];
  }
  return sum;
}

void SsdCarriedRow(float e, const float* g, const float* c, int64_t n, float* dc, float* cs) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto ev = hn::Set(d, e);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    hn::StoreU(hn::Add(hn::LoadU(d, dc + i), hn::Mul(ev, hn::LoadU(d, g + i))), d, dc + i);
    hn::StoreU(hn::Mul(ev, hn::LoadU(d, c + i)), d, cs + i);
  }
  for (; i < n; ++i) {
    dc[i] += e * g[i];
    cs[i] = e * c[i];
  }
}

void SsdAddWeightedRow(double w, const float* g, int64_t n, float* out) {
  int64_t i = 0;
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(dd));
  const auto wv = hn::Set(dd, w);
  for (; i + L <= n; i += L) {
    const auto add = hn::DemoteTo(df, hn::Mul(wv, hn::PromoteTo(dd, hn::LoadU(df, g + i))));
    hn::StoreU(hn::Add(hn::LoadU(df, out + i), add), df, out + i);
  }
#endif
  for (; i < n; ++i) out[i] += static_cast<float>(w * g[i]);
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(SsdSkipRow);
HWY_EXPORT(SsdCarriedRow);
HWY_EXPORT(SsdAddWeightedRow);

double ssd_skip_row(const float* dy, const float* x, float Dh, int64_t n, float* dx) {
  return HWY_DYNAMIC_DISPATCH(SsdSkipRow)(dy, x, Dh, n, dx);
}

void ssd_carried_row(float e, const float* g, const float* c, int64_t n, float* dc, float* cs) {
  HWY_DYNAMIC_DISPATCH(SsdCarriedRow)(e, g, c, n, dc, cs);
}

void ssd_add_weighted_row(double w, const float* g, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(SsdAddWeightedRow)(w, g, n, out);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

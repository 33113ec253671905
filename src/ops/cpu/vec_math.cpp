// Kernels of vec_math.h, compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/vec_math.cpp"
// The order matters: foreach_target.h, then highway.h, then the per-target
// math header.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
#include "ops/cpu/partial_vectors-inl.h"
// clang-format on

#include "ops/cpu/vec_math.h"

#include "ops/cpu/blas.h"

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Runs fn(i, count) over [0, n) a full vector at a time; the tail is handled
// by fn through buffers of one vector (count < lanes).
template <class D, class Fn>
HWY_INLINE void for_vectors(D d, int64_t n, const Fn& fn) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) fn(i, L);
  if (i < n) fn(i, n - i);
}

void DecayProducts(float top, const float* cs, const float* a, const float* b, float* out,
                   int64_t n) {
  const hn::ScalableTag<float> d;
  const auto vtop = hn::Set(d, top), floor = hn::Set(d, -80.f), one = hn::Set(d, 1.f);
  for_vectors(d, n, [&](int64_t i, int64_t count) {
    const auto v = hn::Sub(vtop, load_part(d, cs + i, count));
    const auto e = hn::IfThenZeroElse(hn::Lt(v, floor), hn::Exp(d, v));
    const auto va = a ? load_part(d, a + i, count) : one;
    store_part(d, hn::Mul(hn::Mul(va, e), load_part(d, b + i, count)), out + i, count);
  });
}

void CausalDecayMatrix(const float* cs, const float* sc, int64_t ld_sc, const float* dt,
                       const float* diag, int64_t q, float* M, int64_t ldm) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto floor = hn::Set(d, -80.f);
  for (int64_t t = 0; t < q; ++t) {
    const auto vtop = hn::Set(d, cs[t]);
    const float* a = sc + t * ld_sc;
    float* out = M + t * ldm;
    // Lanes past t (cs, sc and dt are read up to the row's width, within q)
    // are computed as any other and then zeroed.
    const int64_t width = causal_columns(t, q, 1);
    for (int64_t i = 0; i < width; i += L) {
      const int64_t count = std::min(L, width - i);
      const auto v = hn::Sub(vtop, load_part(d, cs + i, count));
      const auto e = hn::IfThenZeroElse(hn::Lt(v, floor), hn::Exp(d, v));
      auto m = hn::Mul(hn::Mul(load_part(d, a + i, count), e), load_part(d, dt + i, count));
      if (i + L > t + 1)
        m = hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(std::max<int64_t>(0, t + 1 - i))), m);
      store_part(d, m, out + i, count);
    }
    if (diag) out[t] += *diag;
  }
}

void ScaleRows(const float* x, int64_t ldx, const float* scale, int64_t rows, int64_t n,
               float* out, int64_t ldo) {
  const hn::ScalableTag<float> d;
  for (int64_t r = 0; r < rows; ++r) {
    const auto s = hn::Set(d, scale[r]);
    const float* xr = x + r * ldx;
    float* o = out + r * ldo;
    for_vectors(d, n, [&](int64_t i, int64_t count) {
      store_part(d, hn::Mul(load_part(d, xr + i, count), s), o + i, count);
    });
  }
}

void ScaledTanh(const float* x, float scale, float* out, int64_t n) {
  const hn::ScalableTag<float> d;
  const auto s = hn::Set(d, scale);
  for_vectors(d, n, [&](int64_t i, int64_t count) {
    store_part(d, hn::Mul(s, hn::Tanh(d, load_part(d, x + i, count))), out + i, count);
  });
}

void MulSilu(const float* y, const float* z, float* out, int64_t n) {
  const hn::ScalableTag<float> d;
  const auto one = hn::Set(d, 1.f);
  for_vectors(d, n, [&](int64_t i, int64_t count) {
    const auto vz = load_part(d, z + i, count);
    const auto silu = hn::Div(vz, hn::Add(one, hn::Exp(d, hn::Neg(vz))));
    store_part(d, hn::Mul(load_part(d, y + i, count), silu), out + i, count);
  });
}

double SumSquares(const float* x, int64_t n) {
#if !HWY_HAVE_FLOAT64  // WebAssembly's SIMD128 target has no double lanes
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
#else
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // half a vector of floats
  const int64_t L = static_cast<int64_t>(hn::Lanes(dd));
  auto s0 = hn::Zero(dd), s1 = hn::Zero(dd);
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    const auto a = hn::PromoteTo(dd, hn::LoadU(df, x + i));
    const auto b = hn::PromoteTo(dd, hn::LoadU(df, x + i + L));
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
  }
  double s = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
  for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
#endif
}

float MaxOf(const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  float mx = x[0];
  int64_t i = 0;
  if (n >= L) {
    auto m = hn::LoadU(d, x);
    for (i = L; i + L <= n; i += L) m = hn::Max(m, hn::LoadU(d, x + i));
    mx = hn::GetLane(hn::MaxOfLanes(d, m));
  }
  for (; i < n; ++i) mx = std::max(mx, x[i]);  // the maximum whatever the order
  return mx;
}

double ExpShiftedSum(float* x, int64_t n, float shift) {
#if !HWY_HAVE_FLOAT64  // WebAssembly's SIMD128 target has no double lanes
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] = std::exp(x[i] - shift);
  return sum;
#else
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many float lanes
  const auto vshift = hn::Set(df, shift);
  auto sum = hn::Zero(dd);
  for_vectors(df, n, [&](int64_t i, int64_t count) {
    const auto e = hn::Exp(df, hn::Sub(load_part(df, x + i, count), vshift));
    store_part(df, e, x + i, count);
    // Lanes past count (zeros loaded, exp(-shift) computed) add nothing.
    sum = hn::Add(sum, hn::PromoteTo(dd, hn::IfThenElseZero(hn::FirstN(df, static_cast<size_t>(count)), e)));
  });
  return hn::GetLane(hn::SumOfLanes(dd, sum));
#endif
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(DecayProducts);
HWY_EXPORT(MulSilu);
HWY_EXPORT(CausalDecayMatrix);
HWY_EXPORT(ScaleRows);
HWY_EXPORT(ScaledTanh);
HWY_EXPORT(SumSquares);
HWY_EXPORT(MaxOf);
HWY_EXPORT(ExpShiftedSum);

void decay_products(float top, const float* cs, const float* a, const float* b, float* out,
                    int64_t n) {
  HWY_DYNAMIC_DISPATCH(DecayProducts)(top, cs, a, b, out, n);
}
void causal_decay_matrix(const float* cs, const float* sc, int64_t ld_sc, const float* dt,
                         const float* diag, int64_t q, float* M, int64_t ldm) {
  HWY_DYNAMIC_DISPATCH(CausalDecayMatrix)(cs, sc, ld_sc, dt, diag, q, M, ldm);
}
void scale_rows(const float* x, int64_t ldx, const float* scale, int64_t rows, int64_t n,
                float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(ScaleRows)(x, ldx, scale, rows, n, out, ldo);
}
void scaled_tanh(const float* x, float scale, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ScaledTanh)(x, scale, out, n);
}
void mul_silu(const float* y, const float* z, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MulSilu)(y, z, out, n);
}
double sum_squares(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumSquares)(x, n); }
double inv_rms_vec(const float* x, int64_t n, float eps) {
  return 1.0 / std::sqrt(sum_squares(x, n) / static_cast<double>(n) + eps);
}
float max_of(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(MaxOf)(x, n); }
double exp_shifted_sum(float* x, int64_t n, float shift) {
  return HWY_DYNAMIC_DISPATCH(ExpShiftedSum)(x, n, shift);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

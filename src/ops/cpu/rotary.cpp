// Kernels of rotary.h, compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/rotary.cpp"
// The order matters: foreach_target.h, then highway.h, then the per-target
// math header.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
#include "ops/cpu/partial_vectors-inl.h"
// clang-format on

#include "ops/cpu/rotary.h"

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Past this |x| Highway's Sin and Cos lose their accuracy (math-inl.h).
constexpr float kVectorRange = 39000.f;

// Cosines and sines of the lanes of x, each lane on its own.
template <class D>
HWY_INLINE void cos_sin(D d, hn::Vec<D> x, hn::Vec<D>& c, hn::Vec<D>& s) {
  c = hn::Cos(d, x);
  s = hn::Sin(d, x);
  const auto far = hn::Gt(hn::Abs(x), hn::Set(d, kVectorRange));
  if (HWY_LIKELY(hn::AllFalse(d, far))) return;
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float xs[kMax], cs[kMax], ss[kMax];
  hn::Store(x, d, xs);
  hn::Store(c, d, cs);
  hn::Store(s, d, ss);
  for (size_t i = 0; i < hn::Lanes(d); ++i)
    if (std::fabs(xs[i]) > kVectorRange) {
      cs[i] = std::cos(xs[i]);
      ss[i] = std::sin(xs[i]);
    }
  c = hn::Load(d, cs);
  s = hn::Load(d, ss);
}

void SinCos(const float* x, float* c, float* s, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = 0; i < n; i += L) {
    const int64_t count = std::min(L, n - i);
    hn::Vec<decltype(d)> vc, vs;
    cos_sin(d, load_part(d, x + i, count), vc, vs);
    store_part(d, vc, c + i, count);
    store_part(d, vs, s + i, count);
  }
}

// Row r of the 2 * rows rows: q's first, then k's.
struct Row {
  const float* x;
  const float* bias;
  float* out;
};
HWY_INLINE Row row_of(const TurnRows& q, const TurnRows& k, int64_t rows, int64_t N, int64_t r) {
  const TurnRows& t = r < rows ? q : k;
  const int64_t i = r < rows ? r : r - rows;
  return {t.x + i * t.ldx, t.bias + i * N, t.out + i * N};
}

// out = x + bias over entries [e0, e1) of every row.
template <class D>
HWY_INLINE void add_bias(D d, const TurnRows& q, const TurnRows& k, int64_t rows, int64_t N,
                         int64_t e0, int64_t e1) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < 2 * rows; ++r) {
    const Row w = row_of(q, k, rows, N, r);
    for (int64_t e = e0; e < e1; e += L) {
      const int64_t count = std::min(L, e1 - e);
      store_part(d, hn::Add(load_part(d, w.x + e, count), load_part(d, w.bias + e, count)),
                 w.out + e, count);
    }
  }
}

// Pairs (j, j + N / 2): the angles' lanes line up with both halves.
void TurnHalves(const TurnRows& q, const TurnRows& k, int64_t rows, int64_t N, const float* phase,
                int64_t S) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d)), half = N / 2;
  add_bias(d, q, k, rows, N, S, half);
  add_bias(d, q, k, rows, N, half + S, N);
  for (int64_t j = 0; j < S; j += L) {
    const int64_t count = std::min(L, S - j);
    hn::Vec<decltype(d)> c, s;
    cos_sin(d, load_part(d, phase + j, count), c, s);
    for (int64_t r = 0; r < 2 * rows; ++r) {
      const Row w = row_of(q, k, rows, N, r);
      const int64_t lo = j, hi = half + j;
      const auto a = hn::Add(load_part(d, w.x + lo, count), load_part(d, w.bias + lo, count));
      const auto b = hn::Add(load_part(d, w.x + hi, count), load_part(d, w.bias + hi, count));
      store_part(d, hn::NegMulAdd(b, s, hn::Mul(a, c)), w.out + lo, count);
      store_part(d, hn::MulAdd(a, s, hn::Mul(b, c)), w.out + hi, count);
    }
  }
}

// Pairs (2 j, 2 j + 1): a vector of entries holds half as many angles, each
// angle in two neighbouring lanes. The cosines and sines of a vector of
// angles are computed once and spread over the two vectors of entries they
// turn (a lane lookup), so each angle's are computed once, not twice; each
// lane's arithmetic is the same whichever lane the angle sits in.
void TurnAdjacent(const TurnRows& q, const TurnRows& k, int64_t rows, int64_t N, const float* phase,
                  int64_t S) {
  const hn::ScalableTag<float> d;
  add_bias(d, q, k, rows, N, 2 * S, N);
#if HWY_TARGET == HWY_SCALAR  // one lane: no neighbour to swap with
  for (int64_t j = 0; j < S; ++j) {
    const float c = std::cos(phase[j]), s = std::sin(phase[j]);
    for (int64_t r = 0; r < 2 * rows; ++r) {
      const Row w = row_of(q, k, rows, N, r);
      const float a = w.x[2 * j] + w.bias[2 * j], b = w.x[2 * j + 1] + w.bias[2 * j + 1];
      w.out[2 * j] = a * c - b * s;
      w.out[2 * j + 1] = a * s + b * c;
    }
  }
#else
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float sign[kMax];  // -1 in the lanes of e0, +1 in those of e1
  // Lane i of the first (second) vector of entries takes angle i / 2 (L / 2
  // + i / 2) of the vector of angles.
  HWY_ALIGN int32_t spread[2][kMax];
  for (size_t i = 0; i < kMax; ++i) {
    sign[i] = i % 2 ? 1.f : -1.f;
    spread[0][i] = static_cast<int32_t>(i / 2);
    spread[1][i] = static_cast<int32_t>(static_cast<size_t>(L) / 2 + i / 2);
  }
  const auto vsign = hn::Load(d, sign);
  const auto first = hn::SetTableIndices(d, spread[0]);
  const auto second = hn::SetTableIndices(d, spread[1]);
  for (int64_t j = 0; j < S; j += L) {
    hn::Vec<decltype(d)> c_angles, s_angles;
    cos_sin(d, load_part(d, phase + j, std::min(L, S - j)), c_angles, s_angles);
    for (int half = 0; half < 2; ++half) {
      const int64_t e = 2 * j + half * L;
      if (e >= 2 * S) break;
      const int64_t count = std::min(L, 2 * S - e);
      const auto& at = half == 0 ? first : second;
      const auto c = hn::TableLookupLanes(c_angles, at);
      const auto s = hn::Mul(hn::TableLookupLanes(s_angles, at), vsign);
      for (int64_t r = 0; r < 2 * rows; ++r) {
        const Row w = row_of(q, k, rows, N, r);
        const auto v = hn::Add(load_part(d, w.x + e, count), load_part(d, w.bias + e, count));
        // (a, b) -> (a c - b s, b c + a s): v c plus the swapped pair times the signed s.
        store_part(d, hn::MulAdd(v, c, hn::Mul(hn::Reverse2(d, v), s)), w.out + e, count);
      }
    }
  }
#endif
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(SinCos);
HWY_EXPORT(TurnHalves);
HWY_EXPORT(TurnAdjacent);

void sin_cos(const float* x, float* c, float* s, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SinCos)(x, c, s, n);
}
void biased_turn(const TurnRows& q, const TurnRows& k, int64_t rows, int64_t N, const float* phase,
                 int64_t S, bool adjacent) {
  if (rows <= 0) return;
  if (adjacent)
    HWY_DYNAMIC_DISPATCH(TurnAdjacent)(q, k, rows, N, phase, S);
  else
    HWY_DYNAMIC_DISPATCH(TurnHalves)(q, k, rows, N, phase, S);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

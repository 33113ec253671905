// Kernels of rank_gates.h, compiled once per Highway target. Built with
// -ffp-contract=off (CMakeLists.txt): the sums must not fuse their products.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/rank_gates.cpp"
// The order matters: foreach_target.h, then highway.h, then the per-target
// math header.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
#include "ops/cpu/partial_vectors-inl.h"
// clang-format on

#include "ops/cpu/rank_gates.h"

#include <algorithm>

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The entries [p, p + count) of y, count <= the lanes.
template <class D>
HWY_INLINE hn::Vec<D> gates_at(D d, const RankGates& g, int64_t R, int64_t P, int64_t p,
                               int64_t count, hn::Vec<D> y) {
  const auto one = hn::Set(d, 1.f);
  const auto z = load_part(d, g.z + p, count);
  const auto w = g.norm ? load_part(d, g.norm + p, count) : one;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t at = r * P + p;
    const auto zr = g.mimo_z ? hn::Mul(z, load_part(d, g.mimo_z + at, count)) : z;
    const auto silu = hn::Div(zr, hn::Add(one, hn::Exp(d, hn::Neg(zr))));
    auto gated = hn::Mul(load_part(d, g.o + at, count), silu);
    if (g.norm) gated = hn::Mul(gated, hn::Mul(hn::Set(d, g.scale[r]), w));
    y = hn::Add(y, g.mimo_o ? hn::Mul(gated, load_part(d, g.mimo_o + at, count)) : gated);
  }
  return y;
}

void RankGatesRow(const RankGates& g, int64_t R, int64_t P, bool accumulate, float* y) {
  const hn::ScalableTag<float> d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const auto zero = hn::Zero(d);
  int64_t p = 0;
  for (; p + L <= P; p += L)
    hn::StoreU(gates_at(d, g, R, P, p, L, accumulate ? hn::LoadU(d, y + p) : zero), d, y + p);
  if (p < P)
    store_part(d, gates_at(d, g, R, P, p, P - p, accumulate ? load_part(d, y + p, P - p) : zero),
               y + p, P - p);
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(RankGatesRow);

void rank_gates(const RankGates& g, int64_t R, int64_t P, bool accumulate, float* y) {
  HWY_DYNAMIC_DISPATCH(RankGatesRow)(g, R, P, accumulate, y);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

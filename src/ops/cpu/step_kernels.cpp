// Kernels of step_kernels.h, compiled once per Highway target. The loops
// they replace were scalar: the compiler may not reorder a float sum, so each
// dot product over N was one chain of dependent adds (Mamba-3's R of them per
// row of the state, most of a MIMO decode step), and the build's baseline
// instruction set (SSE2) capped the rest at 4 lanes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/step_kernels.cpp"
// foreach_target.h before highway.h.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on

#include "ops/cpu/step_kernels.h"

#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// v[i, i + count) in a vector, zeros past count (count <= lanes).
HWY_INLINE VF load_part(DF d, const float* v, int64_t i, int64_t count) {
  if (count == static_cast<int64_t>(hn::Lanes(d))) return hn::LoadU(d, v + i);
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buf, v + i, static_cast<size_t>(count) * sizeof(float));
  return hn::Load(d, buf);
}

HWY_INLINE void store_part(DF d, VF x, float* v, int64_t i, int64_t count) {
  if (count == static_cast<int64_t>(hn::Lanes(d))) return hn::StoreU(x, d, v + i);
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(x, d, buf);
  std::memcpy(v + i, buf, static_cast<size_t>(count) * sizeof(float));
}

void SsdStepHeadImpl(const SsdStepHead& h) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d)), N = h.N;
  const VF decay = hn::Set(d, h.decay);
  for (int64_t p = 0; p < h.P; ++p) {
    float* s = h.S + p * N;
    const VF xdt = hn::Set(d, h.x[p] * h.dt);
    VF acc = hn::Zero(d);
    for (int64_t n = 0; n < N; n += L) {
      const int64_t count = N - n < L ? N - n : L;
      const VF sv =
          hn::MulAdd(xdt, load_part(d, h.B, n, count), hn::Mul(decay, load_part(d, s, n, count)));
      store_part(d, sv, s, n, count);
      acc = hn::MulAdd(sv, load_part(d, h.C, n, count), acc);
    }
    h.y[p] = hn::GetLane(hn::SumOfLanes(d, acc)) + h.d * h.x[p];
  }
}

// Rank kR known at compile time: the R sums of a row stay in registers.
template <int kR>
HWY_INLINE void mamba3_step_fixed(const Mamba3StepHead& h) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d)), N = h.N, P = h.P;
  const VF alpha = hn::Set(d, h.alpha);
  for (int64_t p = 0; p < P; ++p) {
    float* s = h.S + p * N;
    VF bv[kR], gv[kR], acc[kR];
    for (int r = 0; r < kR; ++r) {
      bv[r] = hn::Set(d, h.beta * h.v_prev[r * P + p]);
      gv[r] = hn::Set(d, h.gamma * h.v[r * P + p]);
      acc[r] = hn::Zero(d);
    }
    for (int64_t n = 0; n < N; n += L) {
      const int64_t count = N - n < L ? N - n : L;
      VF sv = hn::Mul(alpha, load_part(d, s, n, count));
      for (int r = 0; r < kR; ++r) {
        sv = hn::MulAdd(bv[r], load_part(d, h.k_prev + r * N, n, count), sv);
        sv = hn::MulAdd(gv[r], load_part(d, h.k + r * N, n, count), sv);
      }
      store_part(d, sv, s, n, count);
      for (int r = 0; r < kR; ++r)
        acc[r] = hn::MulAdd(sv, load_part(d, h.q + r * N, n, count), acc[r]);
    }
    for (int r = 0; r < kR; ++r)
      h.o[r * P + p] = hn::GetLane(hn::SumOfLanes(d, acc[r])) + h.D * h.v[r * P + p];
  }
}

// Any rank: the state's update in one pass, then one pass per output (the
// same lane-wise sums as mamba3_step_fixed, so a rank's results do not depend
// on which path ran).
HWY_INLINE void mamba3_step_any(const Mamba3StepHead& h) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d)), N = h.N, P = h.P, R = h.R;
  const VF alpha = hn::Set(d, h.alpha);
  for (int64_t p = 0; p < P; ++p) {
    float* s = h.S + p * N;
    for (int64_t n = 0; n < N; n += L) {
      const int64_t count = N - n < L ? N - n : L;
      VF sv = hn::Mul(alpha, load_part(d, s, n, count));
      for (int64_t r = 0; r < R; ++r) {
        sv = hn::MulAdd(hn::Set(d, h.beta * h.v_prev[r * P + p]),
                        load_part(d, h.k_prev + r * N, n, count), sv);
        sv = hn::MulAdd(hn::Set(d, h.gamma * h.v[r * P + p]), load_part(d, h.k + r * N, n, count),
                        sv);
      }
      store_part(d, sv, s, n, count);
    }
    for (int64_t r = 0; r < R; ++r) {
      VF acc = hn::Zero(d);
      for (int64_t n = 0; n < N; n += L) {
        const int64_t count = N - n < L ? N - n : L;
        acc = hn::MulAdd(load_part(d, s, n, count), load_part(d, h.q + r * N, n, count), acc);
      }
      h.o[r * P + p] = hn::GetLane(hn::SumOfLanes(d, acc)) + h.D * h.v[r * P + p];
    }
  }
}

void Mamba3StepHeadImpl(const Mamba3StepHead& h) {
  switch (h.R) {
    case 1:
      return mamba3_step_fixed<1>(h);
    case 2:
      return mamba3_step_fixed<2>(h);
    case 4:
      return mamba3_step_fixed<4>(h);
    default:
      return mamba3_step_any(h);
  }
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(SsdStepHeadImpl);
HWY_EXPORT(Mamba3StepHeadImpl);

void ssd_step_head(const SsdStepHead& h) { HWY_DYNAMIC_DISPATCH(SsdStepHeadImpl)(h); }
void mamba3_step_head(const Mamba3StepHead& h) { HWY_DYNAMIC_DISPATCH(Mamba3StepHeadImpl)(h); }

}  // namespace ssm::cpu
#endif  // HWY_ONCE

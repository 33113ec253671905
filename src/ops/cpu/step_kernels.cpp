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
#include "ops/cpu/partial_vectors-inl.h"
// clang-format on

#include "ops/cpu/step_kernels.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/cpu/stream_prefetch.h"

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// A row of the state, F32 or BF16: loads widen BF16 exactly, stores round
// it to nearest even (the state's dtype is the only difference between the
// two instantiations of each kernel below).
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using DH = hn::Rebind<uint16_t, DF>;
using DB = hn::Rebind<hwy::bfloat16_t, DF>;

HWY_INLINE VF load_part(DF d, const uint16_t* v, int64_t count) {
  const DB db;
  if (count == static_cast<int64_t>(hn::Lanes(d)))
    return hn::PromoteTo(d, hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(v)));
  HWY_ALIGN uint16_t buf[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buf, v, static_cast<size_t>(count) * sizeof(uint16_t));
  return hn::PromoteTo(d, hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(buf)));
}

// tensor/convert.cpp's bf16_nearest lane-wise (Highway 1.0's DemoteTo to
// BF16 truncates): add 0x7fff plus the kept bit's parity, keep the high
// half; a NaN keeps its high half with the quiet bit set.
HWY_INLINE void store_part(DF d, VF x, uint16_t* v, int64_t count) {
  const DU du;
  const DI di;
  const DH dh;
  const auto u = hn::BitCast(du, x);
  const auto high = hn::ShiftRight<16>(u);
  auto r = hn::ShiftRight<16>(
      hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), hn::And(high, hn::Set(du, 1u)))));
  const auto nan = hn::Gt(hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu))),
                          hn::Set(di, 0x7f800000));
  r = hn::IfThenElse(hn::RebindMask(du, nan), hn::Or(high, hn::Set(du, 0x40u)), r);
  // Every lane is below 2^16 now: the saturating demotion keeps it whole.
  const auto packed = hn::DemoteTo(dh, hn::BitCast(di, r));
  if (count == static_cast<int64_t>(hn::Lanes(d))) return hn::StoreU(packed, dh, v);
  HWY_ALIGN uint16_t buf[HWY_MAX_BYTES / sizeof(float)];
  hn::StoreU(packed, dh, buf);
  std::memcpy(v, buf, static_cast<size_t>(count) * sizeof(uint16_t));
}

// A step reads its heads' states as one stream (heads in order, rows in
// order): each row's lines are asked for kStreamPrefetchBytes ahead (past a
// head's end, the next head's rows).
template <typename State>
HWY_INLINE void prefetch_row_ahead(const State* s, int64_t N) {
  for (int64_t b = 0; b < N * static_cast<int64_t>(sizeof(State)); b += 64)
    prefetch_stream_ahead(reinterpret_cast<const char*>(s) + b);
}

template <typename State>
HWY_INLINE void ssd_step_rows(const SsdStepHead& h, State* S) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d)), N = h.N;
  const VF decay = hn::Set(d, h.decay);
  for (int64_t p = 0; p < h.P; ++p) {
    State* s = S + p * N;
    prefetch_row_ahead(s, N);
    const VF xdt = hn::Set(d, h.x[p] * h.dt);
    VF acc = hn::Zero(d);
    for (int64_t n = 0; n < N; n += L) {
      const int64_t count = N - n < L ? N - n : L;
      const VF sv =
          hn::MulAdd(xdt, load_part(d, h.B + n, count), hn::Mul(decay, load_part(d, s + n, count)));
      store_part(d, sv, s + n, count);
      // The output reads the new state in F32, before it is rounded (as the
      // reference's step kernel does with a state in the model's dtype).
      acc = hn::MulAdd(sv, load_part(d, h.C + n, count), acc);
    }
    h.y[p] = hn::GetLane(hn::SumOfLanes(d, acc)) + h.d * h.x[p];
  }
}

void SsdStepHeadImpl(const SsdStepHead& h) {
  if (h.S16) return ssd_step_rows(h, h.S16);
  ssd_step_rows(h, h.S);
}

// Rank kR known at compile time: the R sums of a row stay in registers.
template <int kR, typename State>
HWY_INLINE void mamba3_step_fixed(const Mamba3StepHead& h, State* S) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d)), N = h.N, P = h.P;
  const VF alpha = hn::Set(d, h.alpha);
  for (int64_t p = 0; p < P; ++p) {
    State* s = S + p * N;
    prefetch_row_ahead(s, N);
    VF bv[kR], gv[kR], acc[kR];
    for (int r = 0; r < kR; ++r) {
      bv[r] = hn::Set(d, h.beta * h.v_prev[r * P + p]);
      gv[r] = hn::Set(d, h.gamma * h.v[r * P + p]);
      acc[r] = hn::Zero(d);
    }
    for (int64_t n = 0; n < N; n += L) {
      const int64_t count = N - n < L ? N - n : L;
      VF sv = hn::Mul(alpha, load_part(d, s + n, count));
      for (int r = 0; r < kR; ++r) {
        sv = hn::MulAdd(bv[r], load_part(d, h.k_prev + r * N + n, count), sv);
        sv = hn::MulAdd(gv[r], load_part(d, h.k + r * N + n, count), sv);
      }
      store_part(d, sv, s + n, count);
      for (int r = 0; r < kR; ++r)
        acc[r] = hn::MulAdd(sv, load_part(d, h.q + r * N + n, count), acc[r]);
    }
    for (int r = 0; r < kR; ++r)
      h.o[r * P + p] = hn::GetLane(hn::SumOfLanes(d, acc[r])) + h.D * h.v[r * P + p];
  }
}

// Any rank: the state's update in one pass, then one pass per output (the
// same lane-wise sums as mamba3_step_fixed, so a rank's results do not depend
// on which path ran).
// A BF16 state's row is kept in F32 in row (N floats) between the two
// passes, so that the outputs read the unrounded state as the fixed ranks do.
template <typename State>
HWY_INLINE void mamba3_step_any(const Mamba3StepHead& h, State* S, float* row) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d)), N = h.N, P = h.P, R = h.R;
  const VF alpha = hn::Set(d, h.alpha);
  for (int64_t p = 0; p < P; ++p) {
    State* s = S + p * N;
    prefetch_row_ahead(s, N);
    float* f = row;
    if constexpr (std::is_same_v<State, float>) f = s;
    for (int64_t n = 0; n < N; n += L) {
      const int64_t count = N - n < L ? N - n : L;
      VF sv = hn::Mul(alpha, load_part(d, s + n, count));
      for (int64_t r = 0; r < R; ++r) {
        sv = hn::MulAdd(hn::Set(d, h.beta * h.v_prev[r * P + p]),
                        load_part(d, h.k_prev + r * N + n, count), sv);
        sv = hn::MulAdd(hn::Set(d, h.gamma * h.v[r * P + p]), load_part(d, h.k + r * N + n, count),
                        sv);
      }
      if constexpr (!std::is_same_v<State, float>) store_part(d, sv, f + n, count);
      store_part(d, sv, s + n, count);
    }
    for (int64_t r = 0; r < R; ++r) {
      VF acc = hn::Zero(d);
      for (int64_t n = 0; n < N; n += L) {
        const int64_t count = N - n < L ? N - n : L;
        acc = hn::MulAdd(load_part(d, f + n, count), load_part(d, h.q + r * N + n, count), acc);
      }
      h.o[r * P + p] = hn::GetLane(hn::SumOfLanes(d, acc)) + h.D * h.v[r * P + p];
    }
  }
}

#if HWY_TARGET == HWY_WASM
// Rank 1 on WebAssembly (SISO decoding), where mamba3_step_fixed<1>'s loop
// reloads the head's pointers from h and recomputes 64-bit indices for every
// vector, and its one sum per row is a chain of dependent adds (no fused
// multiply-add). Here: two rows of the state per pass, sharing the loads of
// k_prev, k and q; two sums per row (even and odd vectors of N); pointers in
// locals, stepped once per two vectors, so that V8 folds the offsets into
// the loads. Whole vectors only (N a multiple of 2 x lanes, as every
// Mamba-3's d_state); mamba3_step_fixed<1> takes the rest.
HWY_INLINE void rank1_rows(const Mamba3StepHead& h, int64_t p, int64_t rows) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d)), N = h.N;
  const VF alpha = hn::Set(d, h.alpha);
  float* s0 = h.S + p * N;
  float* s1 = s0 + (rows > 1 ? N : 0);  // rows == 1: the same row twice
  const VF b0 = hn::Set(d, h.beta * h.v_prev[p]), g0 = hn::Set(d, h.gamma * h.v[p]);
  const VF b1 = hn::Set(d, h.beta * h.v_prev[p + rows - 1]);
  const VF g1 = hn::Set(d, h.gamma * h.v[p + rows - 1]);
  const float* kp = h.k_prev;
  const float* k = h.k;
  const float* q = h.q;
  const float* const q_end = h.q + N;
  VF e0 = hn::Zero(d), o0 = hn::Zero(d), e1 = hn::Zero(d), o1 = hn::Zero(d);
  for (; q != q_end; q += 2 * L, k += 2 * L, kp += 2 * L, s0 += 2 * L, s1 += 2 * L) {
    const VF kp0 = hn::LoadU(d, kp), kp1 = hn::LoadU(d, kp + L);
    const VF k0 = hn::LoadU(d, k), k1 = hn::LoadU(d, k + L);
    const VF q0 = hn::LoadU(d, q), q1 = hn::LoadU(d, q + L);
    VF a = hn::MulAdd(g0, k0, hn::MulAdd(b0, kp0, hn::Mul(alpha, hn::LoadU(d, s0))));
    VF b = hn::MulAdd(g0, k1, hn::MulAdd(b0, kp1, hn::Mul(alpha, hn::LoadU(d, s0 + L))));
    hn::StoreU(a, d, s0);
    hn::StoreU(b, d, s0 + L);
    e0 = hn::MulAdd(a, q0, e0);
    o0 = hn::MulAdd(b, q1, o0);
    if (rows > 1) {
      a = hn::MulAdd(g1, k0, hn::MulAdd(b1, kp0, hn::Mul(alpha, hn::LoadU(d, s1))));
      b = hn::MulAdd(g1, k1, hn::MulAdd(b1, kp1, hn::Mul(alpha, hn::LoadU(d, s1 + L))));
      hn::StoreU(a, d, s1);
      hn::StoreU(b, d, s1 + L);
      e1 = hn::MulAdd(a, q0, e1);
      o1 = hn::MulAdd(b, q1, o1);
    }
  }
  h.o[p] = hn::GetLane(hn::SumOfLanes(d, hn::Add(e0, o0))) + h.D * h.v[p];
  if (rows > 1) h.o[p + 1] = hn::GetLane(hn::SumOfLanes(d, hn::Add(e1, o1))) + h.D * h.v[p + 1];
}

HWY_INLINE bool mamba3_step_rank1_wasm(const Mamba3StepHead& h) {
  if (h.N == 0 || h.N % (2 * static_cast<int64_t>(hn::Lanes(DF()))) != 0) return false;
  int64_t p = 0;
  for (; p + 2 <= h.P; p += 2) rank1_rows(h, p, 2);
  if (p < h.P) rank1_rows(h, p, 1);
  return true;
}
#endif

template <typename State>
HWY_INLINE void mamba3_step_rows(const Mamba3StepHead& h, State* S) {
  switch (h.R) {
    case 1:
#if HWY_TARGET == HWY_WASM
      if constexpr (std::is_same_v<State, float>)
        if (mamba3_step_rank1_wasm(h)) return;
#endif
      return mamba3_step_fixed<1>(h, S);
    case 2:
      return mamba3_step_fixed<2>(h, S);
    case 4:
      return mamba3_step_fixed<4>(h, S);
    default: {
      // A BF16 row's F32 values between the passes: grown once per thread,
      // so that a warm decode step allocates nothing.
      thread_local std::vector<float> row;
      if (!std::is_same_v<State, float> && row.size() < static_cast<size_t>(h.N)) row.resize(h.N);
      return mamba3_step_any(h, S, row.data());
    }
  }
}

void Mamba3StepHeadImpl(const Mamba3StepHead& h) {
  if (h.S16) return mamba3_step_rows(h, h.S16);
  mamba3_step_rows(h, h.S);
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

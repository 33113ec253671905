// Kernels of lowp_linear.h. This file is compiled once per Highway target
// (foreach_target.h re-includes it); HWY_DYNAMIC_DISPATCH calls the best one
// the CPU supports. Weights are widened to F32 in registers and multiplied
// with F32 activations, so one weight row costs one pass over memory and the
// arithmetic stays F32 (the 16-bit products are exact in F32).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/lowp_linear.cpp"
#include "ops/cpu/lowp_linear.h"

#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <vector>

#include "ssm/tensor/convert.h"

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// Lanes of F32 from element k of a row (k + Lanes(df) <= K).
template <DType kType>
HWY_INLINE hn::Vec<DF> load_widened(DF df, const void* row, int64_t k) {
  if constexpr (kType == DType::kF32) {
    return hn::LoadU(df, static_cast<const float*>(row) + k);
  } else if constexpr (kType == DType::kBF16) {
    const hn::Rebind<hwy::bfloat16_t, DF> dn;
    return hn::PromoteTo(df, hn::LoadU(dn, static_cast<const hwy::bfloat16_t*>(row) + k));
  } else if constexpr (kType == DType::kF16) {
    const hn::Rebind<hwy::float16_t, DF> dn;
    return hn::PromoteTo(df, hn::LoadU(dn, static_cast<const hwy::float16_t*>(row) + k));
  } else {
    const hn::Rebind<int32_t, DF> di;
    const hn::Rebind<int8_t, DF> d8;
    return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, static_cast<const int8_t*>(row) + k)));
  }
}

// One element, for the tail of a row shorter than a vector.
template <DType kType>
HWY_INLINE float scalar_widened(const void* row, int64_t k) {
  float f;
  if constexpr (kType == DType::kF32) {
    f = static_cast<const float*>(row)[k];
  } else if constexpr (kType == DType::kBF16) {
    bf16_to_f32(static_cast<const uint16_t*>(row) + k, &f, 1);
  } else if constexpr (kType == DType::kF16) {
    f16_to_f32(static_cast<const uint16_t*>(row) + k, &f, 1);
  } else {
    f = static_cast<float>(static_cast<const int8_t*>(row)[k]);
  }
  return f;
}

template <DType kType>
HWY_INLINE const void* row_at(const LowpWeights& W, int64_t j) {
  const size_t bytes = kType == DType::kQ8 ? 1 : kType == DType::kF32 ? 4 : 2;
  return static_cast<const char*>(W.data) + static_cast<size_t>(j * W.K) * bytes;
}

// Asks for element k of the row `elements_ahead` elements past `row`: the
// rows of the next group of weight rows, read next. The rows of a group are
// read side by side, as several short streams (1.5 KB per BF16 row of 768)
// that the hardware prefetchers follow badly; this halved the bandwidth of
// BF16 and Q8 rows against F32 ones. The address is only a hint (computed
// as an integer: past the last row it names memory never read).
template <DType kType>
HWY_INLINE void prefetch_ahead(const void* row, int64_t k, int64_t elements_ahead) {
  const size_t bytes = kType == DType::kQ8 ? 1 : kType == DType::kF32 ? 4 : 2;
  const uintptr_t at =
      reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>((k + elements_ahead) * bytes);
  hwy::Prefetch(reinterpret_cast<const char*>(at));
}

HWY_INLINE void store_output(const LowpGemvJob& job, int64_t m, int64_t j, float scale, float sum) {
  float& out = job.y[m * job.ldy + j];
  const float v = scale * sum + (job.bias ? job.bias[j] : 0.f);
  out = job.accumulate ? out + v : v;
}

template <DType kType>
HWY_INLINE float row_scale(const LowpWeights& W, int64_t j) {
  return kType == DType::kQ8 ? W.scales[j * W.scale_stride] : 1.f;
}

#if HWY_TARGET != HWY_WASM
// BF16 rows as pairs. A vector of 32-bit lanes loaded from a BF16 row holds
// elements 2i (low half) and 2i + 1 (high half) of each pair; shifting the
// lane left by 16 bits gives element 2i as F32 and clearing its low half
// gives element 2i + 1: two single-cycle operations for 2 x Lanes weights,
// against a lane-crossing widening and a shift per Lanes weights (the
// widening's port was what held BF16 rows below the memory rate). x is
// taken with its elements in the same order (deinterleave_pairs), so the
// products are the exact F32 products of the widening path.
HWY_INLINE void load_bf16_pairs(DF df, const void* row, int64_t k, hn::Vec<DF>& even,
                                hn::Vec<DF>& odd) {
  const hn::RebindToUnsigned<DF> du;
  const auto u =
      hn::LoadU(du, reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(row) + k));
  even = hn::BitCast(df, hn::ShiftLeft<16>(u));
  odd = hn::BitCast(df, hn::And(u, hn::Set(du, 0xFFFF0000u)));
}

// Elements of BF16 pairs handled per vector step: 2 x Lanes.
HWY_INLINE int64_t pair_step(DF df) { return 2 * static_cast<int64_t>(hn::Lanes(df)); }

// out = x with each block of 2 L elements (L = Lanes) stored as its even
// elements, then its odd ones (the order load_bf16_pairs yields the
// weights in); the tail past the last whole block is copied as it is.
HWY_INLINE void deinterleave_pairs(DF df, const float* x, int64_t K, float* out) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(df)), K_pair = K - K % (2 * L);
  for (int64_t k = 0; k < K_pair; k += 2 * L)
    for (int64_t i = 0; i < L; ++i) {
      out[k + i] = x[k + 2 * i];
      out[k + L + i] = x[k + 2 * i + 1];
    }
  for (int64_t k = K_pair; k < K; ++k) out[k] = x[k];
}
#endif

// One row of x (decode at batch 1): four weight rows at a time, so that
// four independent sums hide the latency of the multiply-adds and each
// vector of x is loaded once for all four.
template <DType kType>
void gemv1_typed(const LowpGemvJob& job) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df)), K = job.W.K;
#if HWY_TARGET != HWY_WASM
  // BF16: x deinterleaved by the caller (gemv_typed), two vectors a step.
  const int64_t K_vec = kType == DType::kBF16 ? K - K % pair_step(df) : K - K % L;
#else
  const int64_t K_vec = K - K % L;
#endif
  const float* x = job.x;
  int64_t j = 0;
  for (; j + 4 <= job.n; j += 4) {
    const void* r0 = row_at<kType>(job.W, j);
    const void* r1 = row_at<kType>(job.W, j + 1);
    const void* r2 = row_at<kType>(job.W, j + 2);
    const void* r3 = row_at<kType>(job.W, j + 3);
    auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
#if HWY_TARGET != HWY_WASM
    if constexpr (kType == DType::kBF16) {
      for (int64_t k = 0; k < K_vec; k += 2 * L) {
        prefetch_ahead<kType>(r0, k, 4 * K);
        prefetch_ahead<kType>(r1, k, 4 * K);
        prefetch_ahead<kType>(r2, k, 4 * K);
        prefetch_ahead<kType>(r3, k, 4 * K);
        const auto xe = hn::LoadU(df, x + k), xo = hn::LoadU(df, x + k + L);
        hn::Vec<DF> e, o;
        load_bf16_pairs(df, r0, k, e, o);
        a0 = hn::MulAdd(o, xo, hn::MulAdd(e, xe, a0));
        load_bf16_pairs(df, r1, k, e, o);
        a1 = hn::MulAdd(o, xo, hn::MulAdd(e, xe, a1));
        load_bf16_pairs(df, r2, k, e, o);
        a2 = hn::MulAdd(o, xo, hn::MulAdd(e, xe, a2));
        load_bf16_pairs(df, r3, k, e, o);
        a3 = hn::MulAdd(o, xo, hn::MulAdd(e, xe, a3));
      }
    } else
#endif
      for (int64_t k = 0; k < K_vec; k += L) {
        prefetch_ahead<kType>(r0, k, 4 * K);
        prefetch_ahead<kType>(r1, k, 4 * K);
        prefetch_ahead<kType>(r2, k, 4 * K);
        prefetch_ahead<kType>(r3, k, 4 * K);
        const auto xv = hn::LoadU(df, x + k);
        a0 = hn::MulAdd(load_widened<kType>(df, r0, k), xv, a0);
        a1 = hn::MulAdd(load_widened<kType>(df, r1, k), xv, a1);
        a2 = hn::MulAdd(load_widened<kType>(df, r2, k), xv, a2);
        a3 = hn::MulAdd(load_widened<kType>(df, r3, k), xv, a3);
      }
    float sums[4] = {hn::GetLane(hn::SumOfLanes(df, a0)), hn::GetLane(hn::SumOfLanes(df, a1)),
                     hn::GetLane(hn::SumOfLanes(df, a2)), hn::GetLane(hn::SumOfLanes(df, a3))};
    const void* rows[4] = {r0, r1, r2, r3};
    for (int r = 0; r < 4; ++r) {
      for (int64_t k = K_vec; k < K; ++k) sums[r] += scalar_widened<kType>(rows[r], k) * x[k];
      store_output(job, 0, j + r, row_scale<kType>(job.W, j + r), sums[r]);
    }
  }
  for (; j < job.n; ++j) {
    const void* row = row_at<kType>(job.W, j);
    auto a = hn::Zero(df);
#if HWY_TARGET != HWY_WASM
    if constexpr (kType == DType::kBF16) {
      for (int64_t k = 0; k < K_vec; k += 2 * L) {
        hn::Vec<DF> e, o;
        load_bf16_pairs(df, row, k, e, o);
        a = hn::MulAdd(o, hn::LoadU(df, x + k + L), hn::MulAdd(e, hn::LoadU(df, x + k), a));
      }
    } else
#endif
      for (int64_t k = 0; k < K_vec; k += L)
        a = hn::MulAdd(load_widened<kType>(df, row, k), hn::LoadU(df, x + k), a);
    float sum = hn::GetLane(hn::SumOfLanes(df, a));
    for (int64_t k = K_vec; k < K; ++k) sum += scalar_widened<kType>(row, k) * x[k];
    store_output(job, 0, j, row_scale<kType>(job.W, j), sum);
  }
}

#if HWY_TARGET == HWY_WASM
// R weight rows against one row of x. WebAssembly has no prefetch
// instruction and no fused multiply-add, which shape this kernel:
// - The R rows are far apart (gemv_typed takes rows j, j + n/4, j + n/2,
//   j + 3n/4), so that the hardware prefetchers see R streams in distinct
//   pages. Four neighbouring rows (four streams 1 to 2 KB apart, what the
//   native kernels read and prefetch by hand) ran at half the speed in V8
//   once the weights no longer fit in the caches, as the built-in model's
//   7 MB do not: every decode step streams them. One row at a time (one
//   stream, x loaded once per row) ran at 0.7.
// - Each vector of x is loaded once for the R rows; per row and per two
//   vectors of K one add into the row's sum (of the two products), so the
//   chain of dependent adds (one per product without FMA) is half as long.
// - Pointers stepped once per two vectors, so that each load's address is a
//   constant offset that V8 folds into the instruction.
// Every row's sum is formed the same way whatever R and whichever rows are
// computed with it, so a row's result depends neither on n (the rows a
// thread is given) nor on the batch.
template <DType kType, int R>
HWY_INLINE void dot_rows(DF df, const void* const (&rows)[R], const float* x, int64_t K,
                         float (&sums)[R]) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t K_pair = K - K % (2 * L), K_vec = K - K % L;
  constexpr size_t kBytes = kType == DType::kQ8 ? 1 : kType == DType::kF32 ? 4 : 2;
  const char* w[R];
  hn::Vec<DF> acc[R];
  for (int r = 0; r < R; ++r) {
    w[r] = static_cast<const char*>(rows[r]);
    acc[r] = hn::Zero(df);
  }
  const float* xp = x;
  const float* const x_pair_end = x + K_pair;
  // Unrolled further, the sums and loads outgrow x86's 16 vector registers
  // in V8's code (it spills).
#pragma clang loop unroll(disable)
  for (; xp != x_pair_end; xp += 2 * L) {
    const auto x0 = hn::LoadU(df, xp), x1 = hn::LoadU(df, xp + L);
    for (int r = 0; r < R; ++r) {
      const auto p0 = hn::Mul(load_widened<kType>(df, w[r], 0), x0);
      const auto p1 = hn::Mul(load_widened<kType>(df, w[r], L), x1);
      acc[r] = hn::Add(acc[r], hn::Add(p0, p1));
      w[r] += static_cast<size_t>(2 * L) * kBytes;
    }
  }
  if (K_pair < K_vec) {
    const auto x0 = hn::LoadU(df, x + K_pair);
    for (int r = 0; r < R; ++r)
      acc[r] = hn::Add(acc[r], hn::Mul(load_widened<kType>(df, rows[r], K_pair), x0));
  }
  for (int r = 0; r < R; ++r) {
    sums[r] = hn::GetLane(hn::SumOfLanes(df, acc[r]));
    for (int64_t k = K_vec; k < K; ++k) sums[r] += scalar_widened<kType>(rows[r], k) * x[k];
  }
}

template <DType kType>
void gemv_typed(const LowpGemvJob& job) {
  const DF df;
  const int64_t q = job.n / 4;
  for (int64_t m = 0; m < job.M; ++m) {
    const float* x = job.x + m * job.ldx;
    for (int64_t j = 0; j < q; ++j) {
      const int64_t js[4] = {j, j + q, j + 2 * q, j + 3 * q};
      const void* const rows[4] = {row_at<kType>(job.W, js[0]), row_at<kType>(job.W, js[1]),
                                   row_at<kType>(job.W, js[2]), row_at<kType>(job.W, js[3])};
      float sums[4];
      dot_rows<kType, 4>(df, rows, x, job.W.K, sums);
      for (int r = 0; r < 4; ++r)
        store_output(job, m, js[r], row_scale<kType>(job.W, js[r]), sums[r]);
    }
    for (int64_t j = 4 * q; j < job.n; ++j) {
      const void* const rows[1] = {row_at<kType>(job.W, j)};
      float sums[1];
      dot_rows<kType, 1>(df, rows, x, job.W.K, sums);
      store_output(job, m, j, row_scale<kType>(job.W, j), sums[0]);
    }
  }
}
#else
// R weight rows against G rows of x (2 to 8 rows: batched decoding): R x G
// sums in registers, each weight vector widened once for the G rows of x and
// each vector of x loaded once for the R weight rows. Every sum is formed
// as gemv1_typed forms it (one vector of sums over K in order, reduced, then
// the tail), so a row's result does not depend on the batch it is in.
template <DType kType, int R, int G>
HWY_INLINE void gemv_tile(const LowpGemvJob& job, int64_t j0, int64_t m0) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df)), K = job.W.K;
  const int64_t K_vec = kType == DType::kBF16 ? K - K % pair_step(df) : K - K % L;
  const void* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = row_at<kType>(job.W, j0 + r);
  const float* xs[G];
  for (int g = 0; g < G; ++g) xs[g] = job.x + (m0 + g) * job.ldx;
  hn::Vec<DF> acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = hn::Zero(df);
  if constexpr (kType == DType::kBF16) {
    // As gemv1_typed's BF16 loop: per sum, the even products, then the odd.
    for (int64_t k = 0; k < K_vec; k += 2 * L) {
      hn::Vec<DF> e[R], o[R];
      for (int r = 0; r < R; ++r) prefetch_ahead<kType>(rows[r], k, R * K);
      for (int r = 0; r < R; ++r) load_bf16_pairs(df, rows[r], k, e[r], o[r]);
      for (int g = 0; g < G; ++g) {
        const auto xe = hn::LoadU(df, xs[g] + k), xo = hn::LoadU(df, xs[g] + k + L);
        for (int r = 0; r < R; ++r)
          acc[r][g] = hn::MulAdd(o[r], xo, hn::MulAdd(e[r], xe, acc[r][g]));
      }
    }
  } else
    for (int64_t k = 0; k < K_vec; k += L) {
      hn::Vec<DF> w[R];
      for (int r = 0; r < R; ++r) prefetch_ahead<kType>(rows[r], k, R * K);
      for (int r = 0; r < R; ++r) w[r] = load_widened<kType>(df, rows[r], k);
      for (int g = 0; g < G; ++g) {
        const auto xv = hn::LoadU(df, xs[g] + k);
        for (int r = 0; r < R; ++r) acc[r][g] = hn::MulAdd(w[r], xv, acc[r][g]);
      }
    }
  for (int r = 0; r < R; ++r) {
    const float scale = row_scale<kType>(job.W, j0 + r);
    for (int g = 0; g < G; ++g) {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[r][g]));
      for (int64_t k = K_vec; k < K; ++k) sum += scalar_widened<kType>(rows[r], k) * xs[g][k];
      store_output(job, m0 + g, j0 + r, scale, sum);
    }
  }
}

// Rows of x per tile: 4 where there are 32 vector registers (16 sums, 4
// weight vectors), 2 otherwise.
constexpr int kTileX = HWY_MAX_BYTES >= 64 ? 4 : 2;

template <DType kType, int R>
HWY_INLINE void gemv_rows(const LowpGemvJob& job, int64_t j0) {
  int64_t m0 = 0;
  for (; m0 + kTileX <= job.M; m0 += kTileX) gemv_tile<kType, R, kTileX>(job, j0, m0);
  switch (job.M - m0) {
    case 1:
      return gemv_tile<kType, R, 1>(job, j0, m0);
    case 2:
      if constexpr (kTileX > 2) return gemv_tile<kType, R, 2>(job, j0, m0);
      break;
    case 3:
      if constexpr (kTileX > 3) return gemv_tile<kType, R, 3>(job, j0, m0);
      break;
    default:
      break;
  }
}

// Rows of x 2 to 8: groups of four weight rows, then the rest one by one.
template <DType kType>
void gemv_all_rows(const LowpGemvJob& job) {
  int64_t j = 0;
  for (; j + 4 <= job.n; j += 4) gemv_rows<kType, 4>(job, j);
  for (; j < job.n; ++j) gemv_rows<kType, 1>(job, j);
}

template <DType kType>
void gemv_typed(const LowpGemvJob& job) {
  if constexpr (kType == DType::kBF16) {
    // x deinterleaved for load_bf16_pairs, into a buffer of this thread
    // (it grows to the largest M x K seen, then nothing is allocated).
    thread_local std::vector<float> pairs;
    const int64_t K = job.W.K;
    if (pairs.size() < static_cast<size_t>(job.M * K)) pairs.resize(static_cast<size_t>(job.M * K));
    for (int64_t m = 0; m < job.M; ++m)
      deinterleave_pairs(DF(), job.x + m * job.ldx, K, pairs.data() + m * K);
    LowpGemvJob paired = job;
    paired.x = pairs.data();
    paired.ldx = K;
    if (job.M == 1) return gemv1_typed<kType>(paired);
    return gemv_all_rows<kType>(paired);
  }
  if (job.M == 1) return gemv1_typed<kType>(job);
  gemv_all_rows<kType>(job);
}
#endif  // HWY_TARGET == HWY_WASM

void Gemv(const LowpGemvJob& job) {
  switch (job.W.dtype) {
    case DType::kF32:
      return gemv_typed<DType::kF32>(job);
    case DType::kBF16:
      return gemv_typed<DType::kBF16>(job);
    case DType::kF16:
      return gemv_typed<DType::kF16>(job);
    default:
      return gemv_typed<DType::kQ8>(job);
  }
}

template <DType kType>
void widen_typed(const LowpWeights& W, int64_t n, float* out) {
  const DF df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df)), K = W.K;
  for (int64_t j = 0; j < n; ++j) {
    const void* row = row_at<kType>(W, j);
    const float scale = kType == DType::kQ8 ? W.scales[j * W.scale_stride] : 1.f;
    const auto vs = hn::Set(df, scale);
    float* o = out + j * K;
    int64_t k = 0;
    for (; k + L <= K; k += L) hn::StoreU(hn::Mul(load_widened<kType>(df, row, k), vs), df, o + k);
    for (; k < K; ++k) o[k] = scale * scalar_widened<kType>(row, k);
  }
}

void Widen(const LowpWeights& W, int64_t n, float* out) {
  switch (W.dtype) {
    case DType::kBF16:
      return widen_typed<DType::kBF16>(W, n, out);
    case DType::kF16:
      return widen_typed<DType::kF16>(W, n, out);
    default:
      return widen_typed<DType::kQ8>(W, n, out);
  }
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ssm::cpu {

HWY_EXPORT(Gemv);
HWY_EXPORT(Widen);

void lowp_gemv(const LowpGemvJob& job) { HWY_DYNAMIC_DISPATCH(Gemv)(job); }
void lowp_widen_rows(const LowpWeights& W, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(Widen)(W, n, out);
}

const char* lowp_target_name() {
  // Targets are bits, better ones lower: the dispatch takes the lowest bit
  // both compiled in and supported by this CPU.
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  return hwy::TargetName(usable & -usable);
}

}  // namespace ssm::cpu
#endif  // HWY_ONCE

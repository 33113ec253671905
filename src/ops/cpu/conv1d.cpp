// The causal depthwise convolution: prefill over channel blocks of each
// batch row, and the decode step (L = 1 with a state) that shifts the state
// in place. Both use the taps in the same order, oldest input first, and the
// same vectorised SiLU (silu_rows.h), so a sequence decoded step by step
// equals its prefill to the last bit. The
// backward is in conv1d_backward.cpp.
#include "ops/cpu/conv1d.h"

#include <algorithm>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/silu_rows.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

using ops::elements;
using ops::elements_or_null;

// The vectorised prefill loop takes kernels of fewer than kMaxTaps taps
// (its buffer holds the taps and one row of sums).
constexpr int64_t kMaxTaps = 8;

void conv1d_prefill(Context& ctx, const ops::Conv1dArgs& a) {
  const int64_t B = a.in.dim(0), L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2);
  const int64_t ld_in = a.in.row_stride(), ld_out = a.out.row_stride();
  const float* weight = a.weight.data<float>();
  const float* bias = elements_or_null<float>(a.bias);
  float* state = elements_or_null<float>(a.state);
  const float* in_all = a.in.data<float>();
  float* out = elements<float>(a.out);
  // Per batch row: channels in blocks, each computing all time steps.
  constexpr int64_t kBlock = 64;
  const int64_t nblocks = (C + kBlock - 1) / kBlock;
  ctx.pool().parallel_for(B * nblocks, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / nblocks;
      const int64_t c0 = (w % nblocks) * kBlock, c1 = std::min(C, c0 + kBlock);
      const float* in = in_all + b * L * ld_in;
      float* st = state ? state + b * (K - 1) * C : nullptr;
      // The input at time t (t < 0: the carried state).
      auto input = [&](int64_t t, int64_t c) -> float {
        if (t >= 0) return in[t * ld_in + c];
        return st ? st[(t + K - 1) * C + c] : 0.f;
      };
      // The first K - 1 steps read the carried state: one channel at a time
      // (all steps for kernels longer than the vectorised loop takes).
      const int64_t head = K < kMaxTaps ? std::min(L, K - 1) : L;
      for (int64_t t = 0; t < head; ++t) {
        float* o = out + (b * L + t) * ld_out;
        for (int64_t c = c0; c < c1; ++c) {
          const float* wc = weight + c * K;
          float acc = bias ? bias[c] : 0.f;
          for (int64_t k = 0; k < K; ++k) acc += wc[k] * input(t - K + 1 + k, c);
          o[c] = acc;
        }
        if (a.silu) silu_in_place(o + c0, c1 - c0);
      }
      // The rest read the input only: the taps transposed once per block so
      // that the loop over channels is contiguous and vectorises. The taps
      // are added in the same order (oldest first) as above and in the step.
      const int64_t nc = c1 - c0;
      float taps[kMaxTaps * kBlock];
      float* acc = taps + K * kBlock;  // kBlock sums after the K tap rows
      for (int64_t k = 0; k < K; ++k)
        for (int64_t c = 0; c < nc; ++c) taps[k * kBlock + c] = weight[(c0 + c) * K + k];
      for (int64_t t = head; t < L; ++t) {
        for (int64_t c = 0; c < nc; ++c) acc[c] = bias ? bias[c0 + c] : 0.f;
        for (int64_t k = 0; k < K; ++k) {
          const float* x = in + (t - K + 1 + k) * ld_in + c0;
          const float* w = taps + k * kBlock;
          for (int64_t c = 0; c < nc; ++c) acc[c] += w[c] * x[c];
        }
        float* o = out + (b * L + t) * ld_out + c0;
        for (int64_t c = 0; c < nc; ++c) o[c] = acc[c];
        if (a.silu) silu_in_place(o, nc);
      }
      if (!st) continue;
      // New state = the last K-1 inputs of (old state, then this sequence).
      // In place: entry s reads old entry s + L > s, not yet overwritten.
      for (int64_t s = 0; s < K - 1; ++s)
        for (int64_t c = c0; c < c1; ++c) st[s * C + c] = input(L - (K - 1) + s, c);
    }
  });
}

// One time step for decoding: no workspace, the state shifted in place.
void conv1d_step(Context& ctx, const ops::Conv1dArgs& a) {
  constexpr int64_t kBlock = 256;
  const int64_t B = a.in.dim(0), C = a.in.dim(2), K = a.weight.dim(2);
  const int64_t nblocks = (C + kBlock - 1) / kBlock;
  // One row (a few thousand multiply-adds) runs on the calling thread:
  // waking the pool for it costs more than it saves.
  parallel_items(ctx.pool(), B * nblocks, kBlock * K, [&](int64_t w0, int64_t w1) {
    const float* weight = a.weight.data<float>();
    const float* bias = elements_or_null<float>(a.bias);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / nblocks;
      const int64_t c0 = (w % nblocks) * kBlock, c1 = std::min(C, c0 + kBlock);
      const float* in = a.in.data<float>() + b * a.in.row_stride();
      float* st = elements<float>(a.state) + b * (K - 1) * C;
      float* o = elements<float>(a.out) + b * a.out.row_stride();
      if (K <= kMaxTaps) {
        // The taps transposed for the block, so that every loop below runs
        // over contiguous channels and vectorises; the same sums, in the
        // same order (oldest input first), as the scalar loop.
        const int64_t nc = c1 - c0;
        float taps[kMaxTaps * kBlock], acc[kBlock];
        for (int64_t c = 0; c < nc; ++c)
          for (int64_t k = 0; k < K; ++k) taps[k * kBlock + c] = weight[(c0 + c) * K + k];
        for (int64_t c = 0; c < nc; ++c) acc[c] = bias ? bias[c0 + c] : 0.f;
        for (int64_t k = 0; k + 1 < K; ++k) {
          const float* __restrict s = st + k * C + c0;
          const float* __restrict w = taps + k * kBlock;
          for (int64_t c = 0; c < nc; ++c) acc[c] += w[c] * s[c];
        }
        const float* __restrict x = in + c0;
        const float* __restrict w_last = taps + (K - 1) * kBlock;
        for (int64_t c = 0; c < nc; ++c) o[c0 + c] = acc[c] + w_last[c] * x[c];
        for (int64_t k = 0; k + 2 < K; ++k)
          for (int64_t c = c0; c < c1; ++c) st[k * C + c] = st[(k + 1) * C + c];
        if (K > 1)
          for (int64_t c = c0; c < c1; ++c) st[(K - 2) * C + c] = in[c];
      } else {
        for (int64_t c = c0; c < c1; ++c) {
          const float* wc = weight + c * K;
          float acc = bias ? bias[c] : 0.f;
          // Taps in the order conv1d_prefill uses: oldest input first.
          for (int64_t k = 0; k + 1 < K; ++k) acc += wc[k] * st[k * C + c];
          acc += wc[K - 1] * in[c];
          o[c] = acc;
          for (int64_t k = 0; k + 2 < K; ++k) st[k * C + c] = st[(k + 1) * C + c];
          if (K > 1) st[(K - 2) * C + c] = in[c];
        }
      }
      if (a.silu) silu_in_place(o + c0, c1 - c0);
    }
  });
}

void conv1d(Context& ctx, const ops::Conv1dArgs& a) {
  if (a.in.dim(1) == 1 && a.state.defined())
    conv1d_step(ctx, a);
  else
    conv1d_prefill(ctx, a);
}

}  // namespace

void add_conv1d_kernels(OpTable& t) {
  t.conv1d = &conv1d;
  t.conv1d_backward = &conv1d_backward;
}

}  // namespace ssm::cpu

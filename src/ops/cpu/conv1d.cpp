// The causal depthwise convolution: prefill a row of all channels at a
// time, and the decode step (L = 1 with a state) that shifts the state
// in place. Both use the taps in the same order, oldest input first, and the
// same vectorised SiLU (conv_taps.h, silu_rows.h), so a sequence decoded step by step
// equals its prefill to the last bit. The
// backward is in conv1d_backward.cpp.
#include "ops/cpu/conv1d.h"

#include <algorithm>

#include "ops/cpu/conv_taps.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/silu_rows.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {
namespace {

using ops::elements;
using ops::elements_or_null;

// The vectorised loops take kernels of at most kMaxTaps taps (the prefill's
// row pointers and the step's buffer of taps have that many slots).
constexpr int64_t kMaxTaps = 8;
// Channels per block of the step (its buffer of taps has that many columns).
constexpr int64_t kStepBlock = 256;
constexpr int64_t kLineFloats = 16;  // a 64-byte cache line

// The input of channel c at time t of batch row b (t < 0: the carried state).
float conv_input(const float* in, int64_t ld_in, const float* st, int64_t K, int64_t C, int64_t t,
                 int64_t c) {
  if (t >= 0) return in[t * ld_in + c];
  return st ? st[(t + K - 1) * C + c] : 0.f;
}

// Kernels longer than the vectorised loop takes: one channel at a time.
void conv1d_prefill_scalar(Context& ctx, const ops::Conv1dArgs& a) {
  const int64_t B = a.in.dim(0), L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2);
  const int64_t ld_in = a.in.row_stride(), ld_out = a.out.row_stride();
  const float* weight = a.weight.data<float>();
  const float* bias = elements_or_null<float>(a.bias);
  const float* state = elements_or_null<float>(a.state);
  ctx.pool().parallel_for(B * L, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / L, t = r % L;
      const float* in = a.in.data<float>() + b * L * ld_in;
      const float* st = state ? state + b * (K - 1) * C : nullptr;
      float* o = elements<float>(a.out) + r * ld_out;
      for (int64_t c = 0; c < C; ++c) {
        const float* wc = weight + c * K;
        float acc = bias ? bias[c] : 0.f;
        for (int64_t k = 0; k < K; ++k)
          acc += wc[k] * conv_input(in, ld_in, st, K, C, t - K + 1 + k, c);
        o[c] = acc;
      }
      if (a.silu) silu_in_place(o, C);
    }
  });
}

// Prefill: each output row from the K input rows it reads (the carried
// state's, or zeros, before the sequence), over all channels at once with
// the taps transposed, so that every load is contiguous; rows are split
// between the threads. The taps are added in the same order (oldest input
// first) and with the same roundings as in the step (conv_taps.h).
void conv1d_prefill(Context& ctx, const ops::Conv1dArgs& a) {
  const int64_t B = a.in.dim(0), L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2);
  const int64_t ld_in = a.in.row_stride(), ld_out = a.out.row_stride();
  const float* weight = a.weight.data<float>();
  const float* bias = elements_or_null<float>(a.bias);
  float* state = elements_or_null<float>(a.state);
  if (K > kMaxTaps) {
    conv1d_prefill_scalar(ctx, a);
  } else {
    Arena& arena = ctx.arena();
    float* taps = elements<float>(arena.alloc(DType::kF32, {K, C}));
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < K; ++k) taps[k * C + c] = weight[c * K + k];
    const float* zeros = state ? nullptr : elements<float>(arena.zeros(DType::kF32, {C}));
    ctx.pool().parallel_for(B * L, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / L, t = r % L;
        const float* in = a.in.data<float>() + b * L * ld_in;
        const float* rows[kMaxTaps];
        for (int64_t k = 0; k < K; ++k) {
          const int64_t u = t - K + 1 + k;
          rows[k] = u >= 0 ? in + u * ld_in : state ? state + (b * (K - 1) + u + K - 1) * C : zeros;
        }
        // The next row's input: a row's C floats are a slice of a wider
        // projection row, and their loads were most of the kernel's samples.
        if (t + 1 < L)
          for (int64_t c = 0; c < C; c += kLineFloats) __builtin_prefetch(in + (t + 1) * ld_in + c);
        float* o = elements<float>(a.out) + r * ld_out;
        conv_taps_row(rows, taps, C, bias, K, C, a.silu, o);
      }
    });
  }
  if (!state) return;
  // New state = the last K-1 inputs of (old state, then this sequence), once
  // every row has read the old one. In place: entry s reads old entry
  // s + L > s, not yet overwritten.
  for (int64_t b = 0; b < B; ++b) {
    const float* in = a.in.data<float>() + b * L * ld_in;
    float* st = state + b * (K - 1) * C;
    for (int64_t s = 0; s < K - 1; ++s)
      for (int64_t c = 0; c < C; ++c) st[s * C + c] = conv_input(in, ld_in, st, K, C, L - (K - 1) + s, c);
  }
}

}  // namespace

// Channels [c0, c1) of batch row b, a block of at most kStepBlock at a time:
// no workspace, the state shifted in place.
void conv1d_step_channels(const ops::Conv1dArgs& a, int64_t b, int64_t c0, int64_t c1) {
  const int64_t C = a.in.dim(2), K = a.weight.dim(2);
  const float* weight = a.weight.data<float>();
  const float* bias = elements_or_null<float>(a.bias);
  const float* in = a.in.data<float>() + b * a.in.row_stride();
  float* st = elements<float>(a.state) + b * (K - 1) * C;
  float* o = elements<float>(a.out) + b * a.out.row_stride();
  for (int64_t block = c0; block < c1; block += kStepBlock) {
    const int64_t end = std::min(c1, block + kStepBlock);
    if (K <= kMaxTaps) {
      // The taps transposed for the block, and the row kernel of the
      // prefill (conv_taps.h) over the state's rows and the input: the
      // same sums, in the same order, so steps equal the prefill.
      const int64_t nc = end - block;
      float taps[kMaxTaps * kStepBlock];
      for (int64_t c = 0; c < nc; ++c)
        for (int64_t k = 0; k < K; ++k) taps[k * kStepBlock + c] = weight[(block + c) * K + k];
      const float* rows[kMaxTaps];
      for (int64_t k = 0; k + 1 < K; ++k) rows[k] = st + k * C + block;
      rows[K - 1] = in + block;
      conv_taps_row(rows, taps, kStepBlock, bias ? bias + block : nullptr, K, nc, a.silu,
                    o + block);
      for (int64_t k = 0; k + 2 < K; ++k)
        for (int64_t c = block; c < end; ++c) st[k * C + c] = st[(k + 1) * C + c];
      if (K > 1)
        for (int64_t c = block; c < end; ++c) st[(K - 2) * C + c] = in[c];
    } else {
      for (int64_t c = block; c < end; ++c) {
        const float* wc = weight + c * K;
        float acc = bias ? bias[c] : 0.f;
        // Taps in the order conv1d_prefill uses: oldest input first.
        for (int64_t k = 0; k + 1 < K; ++k) acc += wc[k] * st[k * C + c];
        acc += wc[K - 1] * in[c];
        o[c] = acc;
        for (int64_t k = 0; k + 2 < K; ++k) st[k * C + c] = st[(k + 1) * C + c];
        if (K > 1) st[(K - 2) * C + c] = in[c];
      }
      if (a.silu) silu_in_place(o + block, end - block);
    }
  }
}

namespace {

// One time step for decoding, in blocks of channels.
void conv1d_step(Context& ctx, const ops::Conv1dArgs& a) {
  const int64_t B = a.in.dim(0), C = a.in.dim(2), K = a.weight.dim(2);
  const int64_t nblocks = (C + kStepBlock - 1) / kStepBlock;
  // One row (a few thousand multiply-adds) runs on the calling thread:
  // waking the pool for it costs more than it saves.
  parallel_items(ctx.pool(), B * nblocks, kStepBlock * K, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t c0 = (w % nblocks) * kStepBlock;
      conv1d_step_channels(a, w / nblocks, c0, std::min(C, c0 + kStepBlock));
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

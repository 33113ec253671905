// The Mamba-1 selective scan on the cpu backend. Every channel's recurrence
// is independent of the others, so a prefill is parallel over (sequence,
// channel) blocks across the pool, each block running its channels' N
// states through time with the channels as vector lanes
// (selective_scan_block.cpp); a decode step is the same loop with L = 1 and
// allocates nothing.
#include <algorithm>
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/cpu/selective_scan_block.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"
#include "ssm/ops/selective_scan.h"

namespace ssm::cpu {
namespace {

using ops::elements;
using ops::elements_or_null;

// Channels per task: a vector block (selective_scan_block.h), enough work
// per task for the pool, few enough tasks per row that two threads share a
// d_inner of 128 evenly.
constexpr int64_t kChannelBlock = kScanBlock;
// The largest state size kept on the stack.
constexpr int64_t kMaxN = kScanMaxN;

void selective_scan(Context& ctx, const ops::SelectiveScanArgs& a) {
  const int64_t Bn = a.x.dim(0), D = a.x.cols();
  SSM_CHECK(a.A_log.dim(1) <= kMaxN, "selective_scan: state size ", a.A_log.dim(1),
            " exceeds the cpu kernel's ", kMaxN);
  const int64_t blocks_per_row = (D + kChannelBlock - 1) / kChannelBlock;
  ctx.pool().parallel_for(Bn * blocks_per_row, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / blocks_per_row, d0 = (i % blocks_per_row) * kChannelBlock;
      selective_scan_block(a, b, d0, std::min(D, d0 + kChannelBlock));
    }
  });
}

// The backward over channels [d0, d1) of every sequence, its dB and dC sums
// over those channels written to (B, L, N) partials of its own. S holds one
// channel's states, (L + 1) N floats.
void scan_channels_backward(const ops::SelectiveScanBackwardArgs& g, int64_t d0, int64_t d1,
                            float* dB, float* dC, float* S) {
  const ops::SelectiveScanArgs& a = g.fwd;
  const int64_t Bn = a.x.dim(0), L = a.x.dim(1), D = a.x.cols(), N = a.A_log.dim(1);
  const ops::Rows<const float> x(a.x), dt_raw(a.dt_raw), Bm(a.B), Cm(a.C), dy(g.dy);
  const ops::Rows<float> dx(g.dx), ddt_raw(g.ddt_raw);
  const float* dt_bias = elements_or_null<const float>(a.dt_bias);
  const float* Dskip = elements_or_null<const float>(a.D);
  const float* A_log = a.A_log.data<float>();
  const float* state = elements_or_null<const float>(a.state);
  float* ddt_bias = elements_or_null<float>(g.ddt_bias);
  float* dA_log = elements_or_null<float>(g.dA_log);
  float* dDskip = elements_or_null<float>(g.dD);
  const bool gate = a.z.defined();
  float A[kMaxN], dA[kMaxN], dS[kMaxN];
  for (int64_t d = d0; d < d1; ++d) {
    for (int64_t n = 0; n < N; ++n) A[n] = -std::exp(A_log[d * N + n]), dA[n] = 0.f;
    const float bias = dt_bias ? dt_bias[d] : 0.f, skip = Dskip ? Dskip[d] : 0.f;
    double dbias = 0, dskip = 0;
    for (int64_t b = 0; b < Bn; ++b) {
      for (int64_t n = 0; n < N; ++n) S[n] = state ? state[(b * D + d) * N + n] : 0.f;
      for (int64_t t = 0; t < L; ++t) {
        const int64_t r = b * L + t;
        const float dt = ops::softplus(dt_raw[r][d] + bias), du = dt * x[r][d];
        for (int64_t n = 0; n < N; ++n)
          S[(t + 1) * N + n] = std::exp(dt * A[n]) * S[t * N + n] + du * Bm[r][n];
      }
      std::fill(dS, dS + N, 0.f);
      for (int64_t t = L - 1; t >= 0; --t) {
        const int64_t r = b * L + t;
        const float u = x[r][d], raw = dt_raw[r][d] + bias, dt = ops::softplus(raw);
        const float* St = S + (t + 1) * N;
        const float* Sp = S + t * N;
        const float* Bt = Bm[r];
        const float* Ct = Cm[r];
        float dpre = dy[r][d];
        if (gate) {
          float pre = skip * u;
          for (int64_t n = 0; n < N; ++n) pre += St[n] * Ct[n];
          const float zv = ops::row<const float>(a.z, r)[d];
          ops::row<float>(g.dz, r)[d] = dpre * pre * ops::silu_grad(zv);
          dpre *= ops::silu(zv);
        }
        float du = dpre * skip, ddt = 0.f;
        dskip += dpre * u;
        float* dBt = dB + r * N;
        float* dCt = dC + r * N;
        for (int64_t n = 0; n < N; ++n) {
          dCt[n] += dpre * St[n];
          const float ds = dS[n] + dpre * Ct[n], decay = std::exp(dt * A[n]);
          dBt[n] += ds * dt * u;
          du += ds * dt * Bt[n];
          ddt += ds * (A[n] * decay * Sp[n] + u * Bt[n]);
          dA[n] += ds * dt * decay * Sp[n];
          dS[n] = ds * decay;
        }
        dx[r][d] = du;
        const float draw = ddt * ops::softplus_grad(raw);
        ddt_raw[r][d] = draw;
        dbias += draw;
      }
    }
    if (ddt_bias) ddt_bias[d] += static_cast<float>(dbias);
    if (dDskip) dDskip[d] += static_cast<float>(dskip);
    if (dA_log)
      for (int64_t n = 0; n < N; ++n) dA_log[d * N + n] += dA[n] * A[n];
  }
}

// Channels split into a fixed number of parts (not the thread count), each
// with its own dB and dC partials summed in part order afterwards: the
// result does not depend on the threads.
constexpr int64_t kBackwardParts = 8;

void selective_scan_backward(Context& ctx, const ops::SelectiveScanBackwardArgs& g) {
  const ops::SelectiveScanArgs& a = g.fwd;
  const int64_t Bn = a.x.dim(0), L = a.x.dim(1), D = a.x.cols(), N = a.A_log.dim(1);
  SSM_CHECK(N <= kMaxN, "selective_scan_backward: state size ", N, " exceeds the cpu kernel's ", kMaxN);
  const int64_t parts = std::min(D, kBackwardParts), per = (D + parts - 1) / parts, BLN = Bn * L * N;
  const Tensor partial = ctx.arena().alloc(DType::kF32, {parts, 2, BLN});
  const Tensor history = ctx.arena().alloc(DType::kF32, {parts, (L + 1) * N});
  float* pb = elements<float>(partial);
  std::fill(pb, pb + partial.numel(), 0.f);
  ctx.pool().parallel_for(parts, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      scan_channels_backward(g, p * per, std::min(D, (p + 1) * per), pb + p * 2 * BLN,
                             pb + (p * 2 + 1) * BLN, elements<float>(history) + p * (L + 1) * N);
  });
  const ops::Rows<float> dBo(g.dB), dCo(g.dC);
  for (int64_t r = 0; r < Bn * L; ++r)
    for (int64_t n = 0; n < N; ++n) {
      float sb = 0.f, sc = 0.f;
      for (int64_t p = 0; p < parts; ++p) {
        sb += pb[p * 2 * BLN + r * N + n];
        sc += pb[(p * 2 + 1) * BLN + r * N + n];
      }
      dBo[r][n] = sb;
      dCo[r][n] = sc;
    }
}

}  // namespace

void add_selective_scan_kernels(OpTable& t) {
  t.selective_scan = &selective_scan;
  t.selective_scan_backward = &selective_scan_backward;
}

}  // namespace ssm::cpu

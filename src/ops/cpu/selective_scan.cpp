// The Mamba-1 selective scan on the cpu backend. Every channel's recurrence
// is independent of the others, so a prefill is parallel over (sequence,
// channel) blocks across the pool, each block running its channels' N
// states through time in registers-sized float arrays; a decode step is the
// same loop with L = 1 and allocates nothing.
#include <algorithm>
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/scalar_math.h"
#include "ops/tensor_data.h"
#include "ssm/ops/selective_scan.h"

namespace ssm::cpu {
namespace {

using ops::elements;
using ops::elements_or_null;

// Channels per task: enough work per task for the pool, few enough tasks
// per row that two threads share a d_inner of 128 evenly.
constexpr int64_t kChannelBlock = 16;
// The largest state size kept on the stack; larger ones run in slices.
constexpr int64_t kMaxN = 256;

void scan_channels(const ops::SelectiveScanArgs& a, int64_t b, int64_t d0, int64_t d1) {
  const int64_t L = a.x.dim(1), D = a.x.cols(), N = a.A_log.dim(1);
  const ops::Rows<const float> x(a.x), dt_raw(a.dt_raw), Bm(a.B), Cm(a.C);
  const ops::Rows<float> y(a.y);
  const float* dt_bias = elements_or_null<const float>(a.dt_bias);
  const float* Dskip = elements_or_null<const float>(a.D);
  const float* A_log = a.A_log.data<float>();
  float* state = elements_or_null<float>(a.state);
  const bool gate = a.z.defined();
  float S[kMaxN], A[kMaxN];
  for (int64_t d = d0; d < d1; ++d) {
    float* st = state ? state + (b * D + d) * N : nullptr;
    for (int64_t n = 0; n < N; ++n) {
      S[n] = st ? st[n] : 0.f;
      A[n] = -std::exp(A_log[d * N + n]);
    }
    const float bias = dt_bias ? dt_bias[d] : 0.f, skip = Dskip ? Dskip[d] : 0.f;
    for (int64_t t = 0; t < L; ++t) {
      const int64_t r = b * L + t;
      const float dt = ops::softplus(dt_raw[r][d] + bias);
      const float u = x[r][d], du = dt * u;
      const float* Bt = Bm[r];
      const float* Ct = Cm[r];
      float acc = 0.f;
      for (int64_t n = 0; n < N; ++n) {
        S[n] = std::exp(dt * A[n]) * S[n] + du * Bt[n];
        acc += S[n] * Ct[n];
      }
      float out = acc + skip * u;
      if (gate) out *= ops::silu(ops::row<const float>(a.z, r)[d]);
      y[r][d] = out;
    }
    if (st) std::copy(S, S + N, st);
  }
}

void selective_scan(Context& ctx, const ops::SelectiveScanArgs& a) {
  const int64_t Bn = a.x.dim(0), D = a.x.cols();
  SSM_CHECK(a.A_log.dim(1) <= kMaxN, "selective_scan: state size ", a.A_log.dim(1),
            " exceeds the cpu kernel's ", kMaxN);
  const int64_t blocks_per_row = (D + kChannelBlock - 1) / kChannelBlock;
  ctx.pool().parallel_for(Bn * blocks_per_row, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / blocks_per_row, d0 = (i % blocks_per_row) * kChannelBlock;
      scan_channels(a, b, d0, std::min(D, d0 + kChannelBlock));
    }
  });
}

}  // namespace

void add_selective_scan_kernels(OpTable& t) { t.selective_scan = &selective_scan; }

}  // namespace ssm::cpu

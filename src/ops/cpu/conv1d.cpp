#include "ssm/ops/conv1d.h"

#include <algorithm>
#include <vector>

#include "ssm/ops/activations.h"

namespace ssm::ops {

void causal_conv1d(const Conv1dArgs& a, ThreadPool& pool) {
  const int64_t B = a.batch, L = a.length, C = a.channels, K = a.kernel;
  // Per batch row: channels in blocks, each computing all time steps.
  const int64_t cblock = 64;
  const int64_t nblocks = (C + cblock - 1) / cblock;
  pool.parallel_for(B * nblocks, [&](int64_t w0, int64_t w1) {
    std::vector<float> window;
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / nblocks;
      const int64_t c0 = (w % nblocks) * cblock, c1 = std::min(C, c0 + cblock);
      const float* in = a.in + b * L * a.ld_in;
      float* st = a.state ? a.state + b * (K - 1) * C : nullptr;
      // The input at time t-K+1+k, reading the carried state before t=0.
      auto input = [&](int64_t t, int64_t c) -> float {
        if (t >= 0) return in[t * a.ld_in + c];
        const int64_t s = t + (K - 1);
        return st ? st[s * C + c] : 0.f;
      };
      for (int64_t t = 0; t < L; ++t) {
        float* o = a.out + (b * L + t) * C;
        for (int64_t c = c0; c < c1; ++c) {
          const float* wc = a.weight + c * K;
          float acc = a.bias ? a.bias[c] : 0.f;
          for (int64_t k = 0; k < K; ++k) acc += wc[k] * input(t - K + 1 + k, c);
          o[c] = a.silu ? silu(acc) : acc;
        }
      }
      if (st) {
        // New state = the last K-1 inputs of (old state ++ this chunk).
        window.assign((K - 1) * (c1 - c0), 0.f);
        for (int64_t s = 0; s < K - 1; ++s)
          for (int64_t c = c0; c < c1; ++c) window[s * (c1 - c0) + c - c0] = input(L - (K - 1) + s, c);
        for (int64_t s = 0; s < K - 1; ++s)
          for (int64_t c = c0; c < c1; ++c) st[s * C + c] = window[s * (c1 - c0) + c - c0];
      }
    }
  });
}

void causal_conv1d_step(const Conv1dStepArgs& a, ThreadPool& pool) {
  constexpr int64_t kBlock = 256;
  const int64_t nblocks = (a.channels + kBlock - 1) / kBlock;
  // One pointer in the capture keeps std::function from allocating per token.
  const Conv1dStepArgs* args = &a;
  pool.parallel_for(a.batch * nblocks, [args, nblocks](int64_t w0, int64_t w1) {
    const Conv1dStepArgs& a = *args;
    const int64_t C = a.channels, K = a.kernel;
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / nblocks;
      const int64_t c0 = (w % nblocks) * kBlock, c1 = std::min(C, c0 + kBlock);
      const float* in = a.in + b * a.ld_in;
      float* st = a.state + b * (K - 1) * C;
      float* o = a.out + b * C;
      for (int64_t c = c0; c < c1; ++c) {
        const float* wc = a.weight + c * K;
        float acc = a.bias ? a.bias[c] : 0.f;
        // Taps in the order causal_conv1d uses: oldest input first.
        for (int64_t k = 0; k + 1 < K; ++k) acc += wc[k] * st[k * C + c];
        acc += wc[K - 1] * in[c];
        o[c] = a.silu ? silu(acc) : acc;
        for (int64_t k = 0; k + 2 < K; ++k) st[k * C + c] = st[(k + 1) * C + c];
        if (K > 1) st[(K - 2) * C + c] = in[c];
      }
    }
  });
}

}  // namespace ssm::ops

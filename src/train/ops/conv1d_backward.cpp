#include "ssm/train/ops/conv1d_backward.h"

#include <algorithm>
#include <vector>

#include "ssm/train/ops/activations_backward.h"

namespace ssm::ops {

void causal_conv1d_backward(const Conv1dBackwardArgs& a, ThreadPool& pool) {
  const int64_t B = a.batch, L = a.length, C = a.channels, K = a.kernel;
  constexpr int64_t kBlock = 16;
  const int64_t nblocks = (C + kBlock - 1) / kBlock;
  pool.parallel_for(nblocks, [&](int64_t w0, int64_t w1) {
    std::vector<float> dpre(L * kBlock);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t c0 = w * kBlock, c1 = std::min(C, c0 + kBlock), nc = c1 - c0;
      for (int64_t b = 0; b < B; ++b) {
        const float* in = a.in + b * L * a.ld_in;
        const float* dout = a.dout + b * L * C;
        float* din = a.din + b * L * a.ld_din;
        // Gradient of the pre-activation, recomputing it where SiLU needs it.
        for (int64_t t = 0; t < L; ++t)
          for (int64_t c = c0; c < c1; ++c) {
            float g = dout[t * C + c];
            if (a.silu) {
              float pre = a.bias ? a.bias[c] : 0.f;
              for (int64_t k = 0; k < K; ++k) {
                const int64_t s = t - K + 1 + k;
                if (s >= 0) pre += a.weight[c * K + k] * in[s * a.ld_in + c];
              }
              g *= silu_grad(pre);
            }
            dpre[t * nc + c - c0] = g;
          }
        // out[t] uses in[t-K+1+k] with weight k: scatter back.
        for (int64_t s = 0; s < L; ++s)
          for (int64_t c = c0; c < c1; ++c) {
            float acc = 0.f;
            for (int64_t k = 0; k < K; ++k) {
              const int64_t t = s + K - 1 - k;
              if (t < L) acc += a.weight[c * K + k] * dpre[t * nc + c - c0];
            }
            din[s * a.ld_din + c] = acc;
          }
        for (int64_t c = c0; c < c1; ++c) {
          if (a.dbias) {
            float s = 0.f;
            for (int64_t t = 0; t < L; ++t) s += dpre[t * nc + c - c0];
            a.dbias[c] += s;
          }
          if (a.dweight)
            for (int64_t k = 0; k < K; ++k) {
              float s = 0.f;
              for (int64_t t = std::max<int64_t>(0, K - 1 - k); t < L; ++t)
                s += dpre[t * nc + c - c0] * in[(t - K + 1 + k) * a.ld_in + c];
              a.dweight[c * K + k] += s;
            }
        }
      }
    }
  });
}

}  // namespace ssm::ops

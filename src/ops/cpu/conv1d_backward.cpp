// Backward of the causal depthwise convolution for sequences that start
// fresh, recomputing the pre-activation where SiLU needs it. Split by
// channel blocks, so sums over batch and time run in a fixed order.
#include <algorithm>

#include "ops/cpu/conv1d.h"
#include "ops/cpu/worker_slots.h"
#include "ops/tensor_data.h"
#include "ops/scalar_math.h"

namespace ssm::cpu {

void conv1d_backward(Context& ctx, const ops::Conv1dBackwardArgs& a) {
  const int64_t B = a.in.dim(0), L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2);
  const int64_t ld_in = a.in.row_stride(), ld_dout = a.dout.row_stride();
  const int64_t ld_din = a.din.row_stride();
  const float* weight = a.weight.data<float>();
  const float* bias = ops::elements_or_null<float>(a.bias);
  float* dweight = ops::elements_or_null<float>(a.dweight);
  float* dbias = ops::elements_or_null<float>(a.dbias);
  constexpr int64_t kBlock = 16;
  const int64_t nblocks = (C + kBlock - 1) / kBlock;
  // Per worker: the gradient of the pre-activation of one channel block.
  const Tensor scratch =
      ctx.arena().alloc(DType::kF32, {worker_slots(ctx.pool(), nblocks), L * kBlock});
  parallel_for_slots(ctx.pool(), nblocks, [&](int64_t slot, int64_t w0, int64_t w1) {
    float* dpre = ops::elements<float>(scratch) + slot * L * kBlock;
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t c0 = w * kBlock, c1 = std::min(C, c0 + kBlock), nc = c1 - c0;
      for (int64_t b = 0; b < B; ++b) {
        const float* in = a.in.data<float>() + b * L * ld_in;
        const float* dout = a.dout.data<float>() + b * L * ld_dout;
        float* din = ops::elements<float>(a.din) + b * L * ld_din;
        for (int64_t t = 0; t < L; ++t)
          for (int64_t c = c0; c < c1; ++c) {
            float g = dout[t * ld_dout + c];
            if (a.silu) {
              float pre = bias ? bias[c] : 0.f;
              for (int64_t k = 0; k < K; ++k) {
                const int64_t s = t - K + 1 + k;
                if (s >= 0) pre += weight[c * K + k] * in[s * ld_in + c];
              }
              g *= ops::silu_grad(pre);
            }
            dpre[t * nc + c - c0] = g;
          }
        // out[t] uses in[t-K+1+k] with weight k: scatter back.
        for (int64_t s = 0; s < L; ++s)
          for (int64_t c = c0; c < c1; ++c) {
            float acc = 0.f;
            for (int64_t k = 0; k < K; ++k) {
              const int64_t t = s + K - 1 - k;
              if (t < L) acc += weight[c * K + k] * dpre[t * nc + c - c0];
            }
            din[s * ld_din + c] = acc;
          }
        for (int64_t c = c0; c < c1; ++c) {
          if (dbias) {
            float s = 0.f;
            for (int64_t t = 0; t < L; ++t) s += dpre[t * nc + c - c0];
            dbias[c] += s;
          }
          if (dweight)
            for (int64_t k = 0; k < K; ++k) {
              float s = 0.f;
              for (int64_t t = std::max<int64_t>(0, K - 1 - k); t < L; ++t)
                s += dpre[t * nc + c - c0] * in[(t - K + 1 + k) * ld_in + c];
              dweight[c * K + k] += s;
            }
        }
      }
    }
  });
}

}  // namespace ssm::cpu

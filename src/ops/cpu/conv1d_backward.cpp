// Backward of the causal depthwise convolution for sequences that start
// fresh, recomputing the pre-activation where SiLU needs it. Split by
// channel blocks, so sums over batch and time run in a fixed order.
#include <algorithm>

#include "ops/cpu/conv1d.h"
#include "ops/cpu/vec_backward.h"
#include "ops/cpu/worker_slots.h"
#include "ops/tensor_data.h"

namespace ssm::cpu {

void conv1d_backward(Context& ctx, const ops::Conv1dBackwardArgs& a) {
  const int64_t B = a.in.dim(0), L = a.in.dim(1), C = a.in.dim(2), K = a.weight.dim(2);
  const int64_t ld_in = a.in.row_stride(), ld_dout = a.dout.row_stride();
  const int64_t ld_din = a.din.row_stride();
  const float* weight = a.weight.data<float>();
  const float* bias = ops::elements_or_null<float>(a.bias);
  float* dweight = ops::elements_or_null<float>(a.dweight);
  float* dbias = ops::elements_or_null<float>(a.dbias);
  // One block of channels is one vector of 16 floats: every loop below runs
  // over the block's channels innermost (contiguous in memory, so the
  // compiler vectorises it), and SiLU's gradient is a vectorised pass.
  constexpr int64_t kBlock = 16;
  const int64_t nblocks = (C + kBlock - 1) / kBlock;
  // Per worker: the pre-activation and its gradient for one channel block,
  // and two arrays of K vectors (wk, seq_w below).
  const int64_t per_slot = (2 * L + 2 * K) * kBlock;
  const Tensor scratch =
      ctx.arena().alloc(DType::kF32, {worker_slots(ctx.pool(), nblocks), per_slot});
  parallel_for_slots(ctx.pool(), nblocks, [&](int64_t slot, int64_t w0, int64_t w1) {
    float* dpre = ops::elements<float>(scratch) + slot * per_slot;
    float* pre = dpre + L * kBlock;
    // wk[k][c]: the block's weights, tap-major; seq_w: dweight's sums over
    // one sequence.
    const auto wk = reinterpret_cast<float(*)[kBlock]>(pre + L * kBlock);
    const auto seq_w = wk + K;
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t c0 = w * kBlock, c1 = std::min(C, c0 + kBlock), nc = c1 - c0;
      std::fill(wk[0], wk[0] + K * kBlock, 0.f);
      float b0[kBlock] = {};
      for (int64_t c = 0; c < nc; ++c) {
        for (int64_t k = 0; k < K; ++k) wk[k][c] = weight[(c0 + c) * K + k];
        b0[c] = bias ? bias[c0 + c] : 0.f;
      }
      // The lanes past the last channel stay zero throughout.
      if (nc < kBlock) std::fill(dpre, dpre + 2 * L * kBlock, 0.f);
      for (int64_t b = 0; b < B; ++b) {
        const float* in = a.in.data<float>() + b * L * ld_in + c0;
        const float* dout = a.dout.data<float>() + b * L * ld_dout + c0;
        float* din = ops::elements<float>(a.din) + b * L * ld_din + c0;
        for (int64_t t = 0; t < L; ++t) {
          float* d = dpre + t * kBlock;
          for (int64_t c = 0; c < nc; ++c) d[c] = dout[t * ld_dout + c];
          if (!a.silu) continue;
          float* p = pre + t * kBlock;
          for (int64_t c = 0; c < nc; ++c) p[c] = b0[c];
          for (int64_t k = std::max<int64_t>(0, K - 1 - t); k < K; ++k) {
            const float* x = in + (t - K + 1 + k) * ld_in;
            for (int64_t c = 0; c < nc; ++c) p[c] += wk[k][c] * x[c];
          }
        }
        if (a.silu) mul_silu_grad(pre, dpre, L * kBlock);
        // out[t] uses in[t-K+1+k] with weight k: scatter back.
        for (int64_t s = 0; s < L; ++s) {
          float acc[kBlock] = {};
          for (int64_t k = std::max<int64_t>(0, s + K - L); k < K; ++k) {
            const float* d = dpre + (s + K - 1 - k) * kBlock;
            for (int64_t c = 0; c < kBlock; ++c) acc[c] += wk[k][c] * d[c];
          }
          for (int64_t c = 0; c < nc; ++c) din[s * ld_din + c] = acc[c];
        }
        // The sums over time of this sequence, each from zero in time order.
        float seq_b[kBlock] = {};
        std::fill(seq_w[0], seq_w[0] + K * kBlock, 0.f);
        for (int64_t t = 0; t < L; ++t) {
          const float* d = dpre + t * kBlock;
          for (int64_t c = 0; c < kBlock; ++c) seq_b[c] += d[c];
          for (int64_t k = std::max<int64_t>(0, K - 1 - t); k < K; ++k) {
            const float* x = in + (t - K + 1 + k) * ld_in;
            for (int64_t c = 0; c < nc; ++c) seq_w[k][c] += d[c] * x[c];
          }
        }
        for (int64_t c = 0; c < nc; ++c) {
          if (dbias) dbias[c0 + c] += seq_b[c];
          if (dweight)
            for (int64_t k = 0; k < K; ++k) dweight[(c0 + c) * K + k] += seq_w[k][c];
        }
      }
    }
  });
}

}  // namespace ssm::cpu

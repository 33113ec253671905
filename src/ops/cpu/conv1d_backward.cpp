// Backward of the causal depthwise convolution for sequences that start
// fresh, recomputing the pre-activation where SiLU needs it. Split by
// blocks of channels, so sums over batch and time run in a fixed order
// whatever the threads.
//
// Each worker sweeps the rows of its channels in time order, all of its
// channels of a row at once: the pre-activation and its gradient of row t,
// then din of row t - K + 1, whose K output rows are all known by then (a
// ring of the last K rows' gradients). Every row is then read as one
// contiguous run; a block of 16 channels at a time, as before, read one
// cache line per row of a 13 KB stride (the in_proj output's rows) and spent
// most of its time waiting for memory. Per channel the operations and their
// order are those of the block loop, so results are unchanged.
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
  // Channels are split in blocks of 16 floats (a cache line of a row), so
  // that two workers never write one line of din.
  constexpr int64_t kBlock = 16;
  const int64_t nblocks = (C + kBlock - 1) / kBlock;
  // Per worker, for up to C channels: the weights tap-major and the bias,
  // the ring of K rows of the pre-activation's gradient, one row of the
  // pre-activation, and one sequence's sums for dweight (tap-major) and dbias.
  const int64_t per_slot = (3 * K + 3) * C;
  const Tensor scratch =
      ctx.arena().alloc(DType::kF32, {worker_slots(ctx.pool(), nblocks), per_slot});
  parallel_for_slots(ctx.pool(), nblocks, [&](int64_t slot, int64_t w0, int64_t w1) {
    const int64_t c0 = w0 * kBlock, n = std::min(C, w1 * kBlock) - c0;
    float* wk = ops::elements<float>(scratch) + slot * per_slot;  // wk[k n + c]
    float* b0 = wk + K * n;
    float* ring = b0 + n;  // row t at ring[(t % K) n]
    float* pre = ring + K * n;
    float* seq_w = pre + n;  // seq_w[k n + c]
    float* seq_b = seq_w + K * n;
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t k = 0; k < K; ++k) wk[k * n + c] = weight[(c0 + c) * K + k];
      b0[c] = bias ? bias[c0 + c] : 0.f;
    }
    for (int64_t b = 0; b < B; ++b) {
      const float* in = a.in.data<float>() + b * L * ld_in + c0;
      const float* dout = a.dout.data<float>() + b * L * ld_dout + c0;
      float* din = ops::elements<float>(a.din) + b * L * ld_din + c0;
      // din[s] = sum over k of w[k] dpre[s + K - 1 - k], the rows past L
      // left out; from zero, k ascending.
      auto din_row = [&](int64_t s) {
        float* out = din + s * ld_din;
        std::fill(out, out + n, 0.f);
        for (int64_t k = std::max<int64_t>(0, s + K - L); k < K; ++k) {
          const float* d = ring + (s + K - 1 - k) % K * n;
          const float* w = wk + k * n;
          for (int64_t c = 0; c < n; ++c) out[c] += w[c] * d[c];
        }
      };
      std::fill(seq_w, seq_w + (K + 1) * n, 0.f);  // seq_w and seq_b
      for (int64_t t = 0; t < L; ++t) {
        float* d = ring + t % K * n;
        const float* g = dout + t * ld_dout;
        std::copy(g, g + n, d);
        const int64_t k0 = std::max<int64_t>(0, K - 1 - t);
        if (a.silu) {
          std::copy(b0, b0 + n, pre);
          for (int64_t k = k0; k < K; ++k) {
            const float* x = in + (t - K + 1 + k) * ld_in;
            const float* w = wk + k * n;
            for (int64_t c = 0; c < n; ++c) pre[c] += w[c] * x[c];
          }
          mul_silu_grad(pre, d, n);
        }
        // The sums over time of this sequence, each from zero in time order.
        for (int64_t c = 0; c < n; ++c) seq_b[c] += d[c];
        for (int64_t k = k0; k < K; ++k) {
          const float* x = in + (t - K + 1 + k) * ld_in;
          float* sw = seq_w + k * n;
          for (int64_t c = 0; c < n; ++c) sw[c] += d[c] * x[c];
        }
        if (t >= K - 1) din_row(t - K + 1);
      }
      for (int64_t s = std::max<int64_t>(0, L - K + 1); s < L; ++s) din_row(s);
      for (int64_t c = 0; c < n; ++c) {
        if (dbias) dbias[c0 + c] += seq_b[c];
        if (dweight)
          for (int64_t k = 0; k < K; ++k) dweight[(c0 + c) * K + k] += seq_w[k * n + c];
      }
    }
  });
}

}  // namespace ssm::cpu

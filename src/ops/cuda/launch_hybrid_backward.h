// The launchers of the HF hybrids' backward ops on the GPU
// (hybrid_backward.cu), in plain types like launch.h: the relu^2 and GELU
// product backwards, the Mamba-1 selective scan backward, the routers'
// backward and the pieces of the routed experts' backward around their
// products. Every sum runs in a fixed order (no floating-point atomics).
#pragma once

#include "ops/cuda/launch.h"

namespace ssm::cuda {

// d = d * 2 max(x, 0), in place.
void launch_relu_squared_backward(ConstRows x, Rows d, cudaStream_t s);
// dgate = d t GELU'(gate), then d = d GELU(gate) (exact GELU).
void launch_gelu_product_backward(ConstRows gate, ConstRows t, Rows dgate, Rows d, cudaStream_t s);

// The selective scan backward (ops/selective_scan.h). A block holds
// kSelectiveBackwardThreads / S channels of one batch row, S lanes a
// channel; it walks time backward chunk by chunk (Q steps), recomputing a
// chunk's states from a checkpoint kept by a first forward pass.
struct SelectiveScanBackwardLaunch {
  int64_t B = 0, L = 0, D = 0, N = 0;
  ConstRows x, dt_raw, Bm, C, z, dy;  // B*L rows; z.p null: no gate
  const float *dt_bias = nullptr, *A_log = nullptr, *Dskip = nullptr;  // bias, Dskip may be null
  const float* state0 = nullptr;                                       // (B, D, N) or null
  Rows dx, ddt_raw, dB, dC, dz;                                        // dz.p null without a gate
  float *ddt_bias = nullptr, *dA_log = nullptr, *dD = nullptr;         // accumulated, or null
  // Scratch (dense F32), sizes from selective_scan_backward_scratch:
  // checkpoints (B*D*chunks*N), one chunk's states (B*D*(Q+1)*N), the
  // per-channel-block partial dB and dC (2*B*L*blocks*N), the per-(b, d)
  // parameter contributions (B*D*(N+2)).
  float* scratch = nullptr;
};
// The floats of scratch launch_selective_scan_backward needs.
int64_t selective_scan_backward_scratch(int64_t B, int64_t L, int64_t D, int64_t N);
void launch_selective_scan_backward(const SelectiveScanBackwardLaunch& a, cudaStream_t s);

// moe_route_backward (ops/moe.h), a thread per token in double: chosen (T,
// k) on the device; router 0 top-k softmax, 1 softmax top-k, 2 sigmoid
// biased.
void launch_moe_route_backward(int router, bool normalize, float scale, ConstRows logits,
                               const int64_t* chosen, int64_t k, ConstRows dweights, Rows dlogits,
                               cudaStream_t s);

// The routed experts' backward around the products, pairs in expert order
// (sorted[i] = t k + j, pos its inverse):
// dweights[t, j] = dout[t] . ys[pos[t k + j]] (a warp per pair, fixed tree).
void launch_expert_output_dot(ConstRows dout, ConstRows ys, const int64_t* pos, int64_t k,
                              Rows dweights, cudaStream_t s);
// out[i] = weights[sorted[i]] dout[sorted[i] / k] (the gathered, weighted
// gradient of each pair's expert output).
void launch_gather_weighted(ConstRows dout, ConstRows weights, const int64_t* sorted, int64_t k,
                            Rows out, cudaStream_t s);
// act (n x F) from h (n x rows): silu(h[:, :F]) h[:, F:2F] (gated) or relu(h)^2.
void launch_expert_act(ConstRows h, int64_t F, bool gated, Rows act, cudaStream_t s);
// dh (n x rows) from dact (n x F) and h: the activation's backward (dh may be h).
void launch_expert_act_backward(ConstRows h, ConstRows dact, int64_t F, bool gated, Rows dh,
                                cudaStream_t s);

}  // namespace ssm::cuda

// A decode step through a stack of Mamba-2 layers (one token per sequence,
// with states), one op so that a backend can run the whole stack in a few
// launches (decoding at batch 1 is bound by launches, not bytes). For each
// layer in order, on the residual rows h:
//   h += norm_linear(ssd_step(norm_linear(h; norm_weight, in_proj), ungated),
//                    gated by z; gate_norm_weight, out_proj)
// that is, what Mamba2Layer's decode step computes (ssm/ops/linear.h,
// ssm/ops/ssd.h), and the layers' convolution and scan states updated.
// Backends without their own kernel (OpTable::mamba2_decode_stack null, or
// returning false for a shape it does not take) run those ops layer by layer.
#pragma once

#include <limits>
#include <vector>

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

// One layer's parameters and states; shapes as Mamba2Layer's (H heads of P
// channels, G groups of N, K taps, C = H*P + 2*G*N conv channels).
struct Mamba2StackLayer {
  Tensor norm_weight;       // (D): the block's RMSNorm
  Tensor in_proj;           // (2*H*P + 2*G*N + H, D) F32 or BF16
  Tensor in_bias;           // (2*H*P + 2*G*N + H), or undefined
  Tensor conv_weight;       // (C, 1, K)
  Tensor conv_bias;         // (C), or undefined
  Tensor dt_bias, A_log;    // (H)
  Tensor D;                 // (H), or undefined
  Tensor gate_norm_weight;  // (H*P), or undefined: the plain gate y * SiLU(z)
  Tensor out_proj;          // (D, H*P), the dtype of in_proj
  Tensor out_bias;          // (D), or undefined
  Tensor conv_state;        // (B, K-1, C) dense, updated
  Tensor state;             // (B, H, P, N) dense, updated
};

struct Mamba2DecodeStackArgs {
  int64_t groups = 1;      // G
  int64_t norm_group = 0;  // the gated norm's channels normalised together (0: all H*P)
  bool norm_before_gate = false;
  float eps = 1e-5f;       // the block's RMSNorm
  float gate_eps = 1e-5f;  // the gated norm
  float dt_min = 0.f, dt_max = std::numeric_limits<float>::infinity();
  std::vector<Mamba2StackLayer> layers;
  Tensor h;  // (B, 1, D) F32 dense: the residual rows, updated
  // How a backend with a kernel runs it: as its settings say (the model's
  // call; the cuda backend's SSM_CUDA_PERSISTENT_DECODE), or, for tests,
  // its kernel whatever they say: one launch for the stack, or one a phase
  // (a check of the phases without the grid barriers between them).
  enum class Launch { kBackend, kOneLaunch, kPhasePerLaunch };
  Launch launch = Launch::kBackend;
};
void mamba2_decode_stack(Context& ctx, const Mamba2DecodeStackArgs& a);
// True when ctx's backend has its own kernel for the op (the model calls it
// only then; elsewhere its layers run their own steps).
bool has_mamba2_decode_stack(const Context& ctx);

namespace detail {
// The definition: the ops of each layer in turn.
void mamba2_decode_stack_composed(Context& ctx, const Mamba2DecodeStackArgs& a);
}  // namespace detail

}  // namespace ssm::ops

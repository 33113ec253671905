// The launcher of mamba2_decode_stack (ssm/ops/mamba2_decode.h) on the GPU:
// a stack of Mamba-2 decode layers as phases of one kernel, in plain types
// as launch.h's.
#pragma once

#include "ops/cuda/launch.h"

namespace ssm::cuda {

// One layer's device pointers (Mamba2StackLayer's tensors; null: absent).
struct Mamba2DecodeLayer {
  const float* norm_weight;
  const void* in_proj;  // (2*H*P + 2*G*N + H, D), F32 or BF16
  const float* in_bias;
  const float* conv_weight;  // (C, K)
  const float* conv_bias;
  const float* dt_bias;
  const float* A_log;
  const float* D;
  const float* gate_norm_weight;
  const void* out_proj;  // (D, H*P)
  const float* out_bias;
  float* conv_state;  // (B, K-1, C)
  float* state;       // (B, H, P, N)
};

// The layers of one launch: the table travels in the kernel's parameters
// (about 3.4 KB of the 4 KB they may take), so that nothing is copied to
// the device before a step and a recorded step replays it as it is. More
// layers take more launches.
inline constexpr int kDecodeMaxLayers = 32;
// The rows of a launch (M of the projections).
inline constexpr int kDecodeMaxRows = 8;
// Channels per work item of the scan phase, and per partial sum of squares.
inline constexpr int kDecodeRows = 16;

struct Mamba2DecodeLaunch {
  int B, D, H, P, N, G, K;
  int norm_group;  // > 0, a multiple of kDecodeRows dividing H*P
  bool norm_before_gate, bf16;
  float eps, gate_eps, dt_min, dt_max;
  float* h;           // (B, D) dense
  float* zxbcdt;      // (B, 2*H*P + 2*G*N + H) scratch
  float* y;           // (B, H*P) scratch: the gated step output before its norm
  float* sums;        // (B, H*P / kDecodeRows) scratch: y's partial sums of squares
  unsigned* barrier;  // two counters, zero before the first launch (the grid barrier's)
  // Each block's slices of in_proj and out_proj copied into its shared
  // memory (cp.async) before they are needed, set by plan_mamba2_decode
  // when they fit (false: the phases read them from global memory).
  bool stage_weights;
  int n_layers;  // <= kDecodeMaxLayers
  Mamba2DecodeLayer layers[kDecodeMaxLayers];
};

// The blocks of a launch: one per multiprocessor when one fits there, 0
// when the kernel cannot run with this shape (the caller composes); sets
// a.stage_weights.
int plan_mamba2_decode(Mamba2DecodeLaunch& a);
// Runs phases [first, last) (3 a layer: in_proj, the scan step, out_proj)
// on `grid` blocks: all in one cooperative launch with grid barriers between
// them, or, phase_per_launch, one plain launch each.
void launch_mamba2_decode(const Mamba2DecodeLaunch& a, int first, int last, int grid,
                          bool phase_per_launch, cudaStream_t s);

}  // namespace ssm::cuda

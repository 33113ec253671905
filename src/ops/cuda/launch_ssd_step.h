// The launchers of ssd_step, the fused Mamba-2 decode step (ssm/ops/ssd.h),
// in plain types as launch.h's.
#pragma once

#include "ops/cuda/launch.h"

namespace ssm::cuda {

// ssd_step (ssm/ops/ssd.h) for B sequences, one token each.
struct SsdStepLaunch {
  int64_t B, H, P, N, G, K;
  ConstRows z, xbc, dt_raw;  // B rows of H*P, H*P + 2*G*N, H
  const float* conv_weight;  // (H*P + 2*G*N, K)
  const float* conv_bias;    // or null
  float* conv_state;         // (B, K-1, H*P + 2*G*N)
  const float* dt_bias;      // (H)
  const float* A_log;        // (H)
  float dt_min, dt_max;
  const float* D;            // (H) or null
  const float* norm_weight;  // (H*P) or null: out = y silu(z)
  int64_t norm_group;        // > 0, divides H*P
  float eps;
  bool norm_before_gate;
  StatePtr state;  // (B, H, P, N)
  Rows out;      // B rows of H*P
  bool gated;    // false: out = y + D x (SsdStepArgs::gated), no second launch
  // B counters at zero (CudaResources::step_counters), left at zero: the
  // blocks of a sequence count themselves in, the last shifts the B and C
  // channels' convolution state.
  unsigned* counters;
  bool overlap;  // the first kernel launched to overlap the one before (overlap_launch.h)
  // Where ssd_step_streams: B rows of ssd_step_row_floats floats (the
  // convolved x, B and C channels, dt and exp(dt A) of each sequence),
  // which the step then takes in two launches (ssd_step_wide.cu); null:
  // the one launch (ssd_step_kernel).
  float* rows = nullptr;
};
// The sequences a step takes (CudaResources::step_counters' size); more
// take the four ops.
inline constexpr int64_t kStepCounters = 4096;
// The convolution, dt, the scan step and D (conv_ssd.cu: y into out, the
// convolution state shifted), then, when gated, the gated norm of out in
// place (launch_ssd_step_norm, norms.cu).
void launch_ssd_step(const SsdStepLaunch& a, cudaStream_t s);  // N <= 512
void launch_ssd_step_norm(const SsdStepLaunch& a, cudaStream_t s);
// Whether the step's shape takes the many-sequence kernels of
// ssd_step_wide.cu when given a.rows (conv_ssd.cu: the wide blocks' rule,
// N a multiple of 8, the state 16-byte aligned), and the floats of a row.
bool ssd_step_streams(const SsdStepLaunch& a);
int64_t ssd_step_row_floats(const SsdStepLaunch& a);
// The two launches (ssd_step_wide.cu): the convolution step and dt, then
// the state step; without the gated norm (launch_ssd_step adds it).
void launch_ssd_step_wide(const SsdStepLaunch& a, cudaStream_t s);

}  // namespace ssm::cuda

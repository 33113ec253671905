// One decode step of the Mamba-2 recurrence (SPEC §3), per batch row b and
// head h, with the state updated in place:
//   S <- exp(dt A) S + dt x B^T          S is (P, N)
//   y  = S C + D x
// The oracle is ssd_scan_reference with length 1; this is the fast path that
// decoding calls once per token, so it allocates nothing.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

struct SsdStepArgs {
  int64_t batch = 0;                                        // B
  int64_t heads = 0, headdim = 0, d_state = 0, groups = 1;  // H, P, N, G
  // Row b of each input starts at b times its row stride; heads and groups
  // are contiguous blocks inside the row (the layout of ssd_scan.h).
  const float* x = nullptr;  // x[b * ld_x + h * P + p]
  int64_t ld_x = 0;
  const float* B = nullptr;  // B[b * ld_bc + g * N + n]
  const float* C = nullptr;
  int64_t ld_bc = 0;
  const float* dt = nullptr;  // dt[b * ld_dt + h], after softplus and clamp
  int64_t ld_dt = 0;
  const float* A = nullptr;  // (H), negative
  const float* D = nullptr;  // (H) or null
  float* y = nullptr;        // y[b * ld_y + h * P + p]
  int64_t ld_y = 0;
  float* state = nullptr;    // (B, H, P, N), advanced by one step
};

void ssd_step(const SsdStepArgs& a, ThreadPool& pool);

}  // namespace ssm::ops

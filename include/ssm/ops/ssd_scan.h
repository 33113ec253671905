// The Mamba-2 selective state-space scan (SPEC §3), per batch row b and head h:
//   S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T      S is (P, N)
//   y_t = S_t C_t + D x_t
// Two implementations of one signature: the chunked SSD form for prefill
// (cpu/) and the plain recurrence kept as the test oracle (ref/).
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

struct SsdScanArgs {
  int64_t batch = 0, length = 0;                       // B, L
  int64_t heads = 0, headdim = 0, d_state = 0, groups = 1;  // H, P, N, G
  int64_t chunk = 256;                                  // Q (chunked form only)
  // Element (b, t, ...) of each input lives at row (b * L + t) times its
  // row stride; heads and groups are contiguous blocks inside the row.
  const float* x = nullptr;  // x[row * ld_x + h * P + p]
  int64_t ld_x = 0;
  const float* B = nullptr;  // B[row * ld_bc + g * N + n]
  const float* C = nullptr;
  int64_t ld_bc = 0;
  const float* dt = nullptr;  // dt[row * ld_dt + h], after softplus and clamp
  int64_t ld_dt = 0;
  const float* A = nullptr;  // (H), negative
  const float* D = nullptr;  // (H) or null
  float* y = nullptr;        // y[row * ld_y + h * P + p]
  int64_t ld_y = 0;
  // (B, H, P, N): the state before t=0 on entry, after t=L-1 on return.
  float* state = nullptr;
};

// Chunked SSD: matrix products inside chunks, state passed between chunks.
void ssd_scan_chunked(const SsdScanArgs& a, ThreadPool& pool);

// Sequential recurrence in double precision: the oracle.
void ssd_scan_reference(const SsdScanArgs& a);

}  // namespace ssm::ops

// Backward of the Mamba-3 trapezoidal scan (ops/mamba3_scan.h) in its
// chunked form. Memory stays bounded: per (batch row, head) only the states
// at chunk boundaries are kept; everything inside a chunk is recomputed.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"
#include "ssm/ops/mamba3_scan.h"

namespace ssm::ops {

struct Mamba3ScanGrads {
  // Overwritten, with the layouts of the matching inputs.
  float* dq = nullptr;    // (B, H, L, R, N)
  float* dk = nullptr;    // (B, H, L, R, N)
  float* dv = nullptr;    // (B, H, L, R, P)
  float* ddt = nullptr;   // (B, H, L)
  float* dA = nullptr;    // (B, H, L)
  float* dlam = nullptr;  // (B, H, L)
  float* dD = nullptr;    // (H), accumulated; may be null
};

// `a` holds the forward's inputs; a.o is unused. a.ssm, a.k_prev and a.v_prev
// are the state before t=0, read only: all three null for a fresh sequence.
// dout (B, H, L, R, P) is the gradient of o; the final state receives no
// gradient, and none is returned for the starting state. a.chunk is the
// forward's (rows per chunk), though any chunk gives the same gradient.
void mamba3_scan_backward(const Mamba3ScanArgs& a, const float* dout, const Mamba3ScanGrads& g,
                          ThreadPool& pool);

}  // namespace ssm::ops

// Backward of the Mamba-2 SSD scan (ops/ssd_scan.h) in its chunked form.
// Memory stays bounded: only the states at chunk boundaries are kept (one
// head at a time); everything inside a chunk is recomputed from the inputs.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"
#include "ssm/ops/ssd_scan.h"

namespace ssm::ops {

struct SsdScanGrads {
  // Overwritten, with the layouts of the matching inputs.
  float* dx = nullptr;
  int64_t ld_dx = 0;
  float* dB = nullptr;
  float* dC = nullptr;
  int64_t ld_dbc = 0;
  float* ddt = nullptr;
  int64_t ld_ddt = 0;
  // (H), accumulated; may be null.
  float* dA = nullptr;
  float* dD = nullptr;
};

// `a` holds the forward's inputs; a.state is the state before t=0 (read
// only; null means zero) and a.y is unused. dy (B*L rows, stride ld_dy) is
// the gradient of y; the final state receives no gradient.
void ssd_scan_backward(const SsdScanArgs& a, const float* dy, int64_t ld_dy, const SsdScanGrads& g,
                       ThreadPool& pool);

}  // namespace ssm::ops

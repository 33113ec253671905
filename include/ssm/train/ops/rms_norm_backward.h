// Backward of the RMSNorms of SPEC §1 and §3 (ops/rms_norm.h).
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"

namespace ssm::ops {

// y = x / sqrt(mean(x^2) + eps) * w over rows of `dim`:
// dx = r w dy - x r^3 / dim * sum(x w dy),  dw += sum over rows of dy x r.
// dx is overwritten, or added to when accumulate_dx (the residual stream's
// gradient). dw may be null. dx may not alias x or dy.
void rms_norm_backward(const float* x, const float* w, const float* dy, int64_t rows, int64_t dim,
                       float eps, float* dx, bool accumulate_dx, float* dw, ThreadPool& pool);

struct GatedRmsNormBackwardArgs {
  int64_t rows = 0, dim = 0, group = 0;  // groups of `group` channels normalised apart
  float eps = 1e-5f;
  bool norm_before_gate = false;
  const float* y = nullptr;  // (rows, dim) the ungated input
  const float* z = nullptr;  // gate, row stride ldz
  int64_t ldz = 0;
  const float* w = nullptr;     // (dim), or null: no norm, out = y * silu(z)
  const float* dout = nullptr;  // (rows, dim)
  float* dy = nullptr;          // (rows, dim) overwritten
  float* dz = nullptr;          // overwritten, row stride lddz
  int64_t lddz = 0;
  float* dw = nullptr;  // (dim) accumulated, may be null
};

// Backward of ops::gated_rms_norm (and of plain gating when w is null).
void gated_rms_norm_backward(const GatedRmsNormBackwardArgs& a, ThreadPool& pool);

}  // namespace ssm::ops

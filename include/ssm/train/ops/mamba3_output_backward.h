// Backward of ops::mamba3_output (ops/mamba3_scan.h): per (row, head, rank)
//   zr = z mimo_z_r,  o' = RMSNorm_P(o_r) norm_h (or o_r),
//   y_h = sum_r o' SiLU(zr) mimo_o_r.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"
#include "ssm/ops/mamba3_scan.h"

namespace ssm::ops {

struct Mamba3OutputGrads {
  const float* dy = nullptr;  // dy[row*ld_dy + h*P + p], the gradient of y
  int64_t ld_dy = 0;
  float* d_o = nullptr;  // (B, H, L, R, P) overwritten
  float* dz = nullptr;   // dz[row*ld_dz + h*P + p] overwritten
  int64_t ld_dz = 0;
  // Accumulated; may be null (not wanted, or the parameter is absent).
  float* dmimo_z = nullptr;  // (H, R, P)
  float* dmimo_o = nullptr;  // (H, R, P)
  float* dnorm = nullptr;    // (H*P)
};

// `a` holds the forward's inputs (a.y unused). Parallel over heads: each
// head's parameter gradients sum its rows in a fixed order.
void mamba3_output_backward(const Mamba3OutputArgs& a, const Mamba3OutputGrads& g,
                            ThreadPool& pool);

}  // namespace ssm::ops

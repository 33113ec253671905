// Backward of ops::mamba3_prepare (ops/mamba3_scan.h): from the gradients of
// dt, A, lam, q, k, v back to the in_proj segments and the parameters:
//   rotation by the phase (whose gradient runs back through the cumulative
//   sum over time into dt and ang), per-head biases, the B/C RMSNorms with
//   their weights, softplus dt, the heavy-tail A with its floor (gradient 0
//   where the floor is active), sigmoid lam, and v = x mimo_x.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"
#include "ssm/ops/mamba3_scan.h"

namespace ssm::ops {

struct Mamba3PrepareGrads {
  // Gradients of the prepare outputs, in their (B, H, L, ...) layouts.
  // dq and dk are read, then overwritten in place with the gradients of q
  // and k before rotation.
  float* dq = nullptr;
  float* dk = nullptr;
  const float* dv = nullptr;
  const float* ddt = nullptr;
  const float* dA = nullptr;
  const float* dlam = nullptr;

  // Overwritten: the gradients of the in_proj segments, laid out like the
  // inputs they belong to (dx like a.x, ...) with row stride ld.
  float *dx = nullptr, *dB = nullptr, *dC = nullptr, *dddt = nullptr, *dddA = nullptr;
  float *dtrap = nullptr, *dang = nullptr;
  int64_t ld = 0;

  // Parameter gradients, accumulated; may be null.
  float* ddt_bias = nullptr;  // (H)
  float* dB_norm = nullptr;   // (N)
  float* dC_norm = nullptr;   // (N)
  float* dB_bias = nullptr;   // (H, R, N)
  float* dC_bias = nullptr;   // (H, R, N)
  float* dmimo_x = nullptr;   // (H, R, P)
};

// `a` holds the forward's arguments after it ran: its inputs, and its
// outputs dt, lam, q, k (rotated) and phases, which must be present.
// Sums over heads, rows and batch run in a fixed order whatever the threads.
void mamba3_prepare_backward(const Mamba3PrepareArgs& a, const Mamba3PrepareGrads& g,
                             ThreadPool& pool);

}  // namespace ssm::ops

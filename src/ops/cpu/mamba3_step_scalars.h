// The three scalars of each Mamba-3 step (SPEC §4) over a run of steps,
// vectorised (Highway, chosen at run time for the CPU): one exp, log1p or
// division per lane instead of libm calls per step and head, which were
// about a tenth of a SISO prefill's time outside the projections. Every
// step gets the same lane-wise arithmetic wherever it sits in the run (a
// tail goes through a full vector), so a step's values do not depend on
// the length of the run (prefill and decode agree).
#pragma once

#include <cstdint>

namespace ssm::cpu {

// In place, for i < n:
//   dt[i]  <- softplus(dt[i] + dt_bias)        (log(1 + e^x); x past 20: x)
//   A[i]   <- min(-heavy_tail(A[i]), -A_floor)  (1 + v for v >= 0, else 1 / (1 - v))
//   lam[i] <- sigmoid(lam[i])
// taking the raw projections ddt, ddA and trap as the inputs.
void mamba3_step_scalars(float* dt, float* A, float* lam, int64_t n, float dt_bias, float A_floor);

}  // namespace ssm::cpu

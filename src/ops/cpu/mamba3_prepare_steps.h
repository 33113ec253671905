// The two passes of the cpu mamba3_prepare, shared with the fused prepare and
// scan (mamba3_prepare_scan.cpp): the rows' pass (B and C normed, angle
// rates: what the heads share), then per (batch row, head) and step the
// step scalars and the vectors q, k, v. One step's arithmetic is the same
// whichever caller runs it, so the fused op's values equal the separate ops'.
#pragma once

#include <cstdint>

#include "ops/cpu/mamba3_math.h"
#include "ssm/ops/context.h"

namespace ssm::cpu::m3 {

// Per row: B and C normed for every (rank, group), and the angle rates.
void prepare_rows(Context& ctx, const ops::Mamba3PrepareArgs& a, const PrepareDims& d);

// The per-head part of a prepare call (after prepare_rows), as raw pointers.
class PrepareHeads {
 public:
  explicit PrepareHeads(const ops::Mamba3PrepareArgs& a);

  // dt, A and lam of every step of (batch row, head) i, written to the
  // outputs (mamba3_step_scalars.h).
  void scalars(int64_t i) const;
  // Step t of i (its scalars written): advances the phase of i by the step
  // and writes q and k (R x N) and v (R x P) at the given addresses, and the
  // phase to the kept phases if any.
  void vectors(int64_t i, int64_t t, float* q, float* k, float* v) const;

  // Asks for the cache lines of the parameters vectors(i, ...) reads that no
  // other head reads (i's rows of B_bias, C_bias and mimo_x): a decode step
  // reads them once per token, after the weights streamed by have evicted
  // them, and their loads missed the caches (perf).
  void prefetch_params(int64_t i) const;

  const PrepareDims& dims() const { return d_; }

 private:
  const ops::Mamba3PrepareArgs& a_;
  PrepareDims d_;
  const float *dt_bias_, *mimo_x_, *B_bias_, *C_bias_, *B_normed_, *C_normed_, *ang_rate_;
  float *phase_io_, *phases_, *dt_out_, *A_out_, *lam_out_;
};

}  // namespace ssm::cpu::m3

// Mamba-3 MIMO's output gates of one (row, head), vectorised (Highway, chosen
// at run time for the CPU). The op's loop called the vectorised SiLU a block
// of 64 entries at a time with scalar loops for each factor around it, and
// the SiLU's long dependency chain ran four vectors per call: together the
// largest share of a MIMO prefill outside the products (perf, docs/CPU.md).
#pragma once

#include <cstdint>

namespace ssm::cpu {

// What one (row, head) of mamba3_output reads: R rank rows of P entries.
// Null factors count as 1.
struct RankGates {
  const float* o;       // (R, P): the scan's outputs
  const float* z;       // (P): the head's gate input, shared by its ranks
  const float* mimo_z;  // (R, P) or null
  const float* norm;    // (P) or null: the norm's weights
  const float* scale;   // (R) or null: each rank's 1 / rms, with norm
  const float* mimo_o;  // (R, P) or null
};

// y[p] = sum_r ((o[r, p] SiLU(z[p] mimo_z[r, p])) (scale[r] norm[p])) mimo_o[r, p],
// summed from rank 0 up from +0 (from y itself when `accumulate`), each product rounded on its own (no fused
// multiply-add, as the scalar loops it replaced), SiLU(x) = x / (1 + exp(-x))
// as mul_silu forms it: the values are those loops' to the bit.
void rank_gates(const RankGates& g, int64_t R, int64_t P, bool accumulate, float* y);

}  // namespace ssm::cpu

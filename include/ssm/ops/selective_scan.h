// The Mamba-1 selective state-space model S6 (docs/MATH.md, "Mamba-1"), as
// one op over the channels d of the inner width, each with its own N states:
//   dt_t = softplus(dt_raw_t + dt_bias)                  per channel
//   S_t  = exp(dt_t A) * S_{t-1} + dt_t x_t B_t          S is (D, N), A (D, N)
//   y_t  = (S_t C_t + Dskip x_t) * SiLU(z_t)             the gate only with z
// with A = -exp(A_log). B_t and C_t (N) are shared by every channel of a row.
// Backends choose their algorithm (the channels are independent, so a
// prefill parallelises over them); the result does not depend on it.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct SelectiveScanArgs {
  Tensor x;        // (B, L, D) rows: the conv output
  Tensor dt_raw;   // (B, L, D) rows: dt_proj's output before its bias
  Tensor dt_bias;  // (D), or undefined
  Tensor A_log;    // (D, N) dense
  Tensor B;        // (B, L, N) rows
  Tensor C;        // (B, L, N) rows
  Tensor D;        // (D), or undefined
  Tensor z;        // (B, L, D) rows, or undefined: no gate
  Tensor y;        // (B, L, D) rows, written; may not alias the inputs
  // (B, D, N) dense: the state before t = 0 on entry, after t = L-1 on
  // return. Undefined: a fresh sequence, final state dropped.
  Tensor state;
};
void selective_scan(Context& ctx, const SelectiveScanArgs& a);

}  // namespace ssm::ops

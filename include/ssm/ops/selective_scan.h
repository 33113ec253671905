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

// The backward of selective_scan, through the recurrence (every state kept
// per channel, then walked back from t = L-1), with dt's softplus and
// A = -exp(A_log) included:
//   dpre = dy SiLU(z), dz = dy pre SiLU'(z), dS_t += dpre C_t, dC_t += dpre S_t
//   dB_t += dS_t dt u, du += dS_t.B_t dt + dpre D, ddt += dS_t.(A a_t S_{t-1} + u B_t)
//   dA += dS_t dt a_t S_{t-1}, dS_{t-1} = a_t dS_t      (a_t = exp(dt A))
//   ddt_raw = ddt sigmoid(dt_raw + dt_bias), dA_log = dA A
// B and C are shared by every channel, so dB and dC sum over the channels.
struct SelectiveScanBackwardArgs {
  SelectiveScanArgs fwd;  // the forward's inputs; y unused, state read only (the initial state)
  Tensor dy;              // (B, L, D) rows
  Tensor dx;              // (B, L, D) rows, overwritten
  Tensor ddt_raw;         // (B, L, D) rows, overwritten
  Tensor dB, dC;          // (B, L, N) rows, overwritten
  Tensor dz;              // (B, L, D) rows, overwritten; defined exactly when fwd.z is
  Tensor ddt_bias;        // (D), accumulated; undefined: not wanted
  Tensor dA_log;          // (D, N), accumulated; undefined: not wanted
  Tensor dD;              // (D), accumulated; undefined: not wanted
};
void selective_scan_backward(Context& ctx, const SelectiveScanBackwardArgs& a);

}  // namespace ssm::ops

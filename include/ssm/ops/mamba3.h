// The Mamba-3 mixer's math between in_proj and out_proj (SPEC §4), as three
// ops whose arguments name every intermediate, so that the backward reuses
// them:
//   mamba3_prepare  in_proj segments -> dt, A, lam, q, k, v (and the phase)
//   mamba3_scan     the trapezoidal recurrence, per batch row b and head h:
//                     S_t = alpha_t S_{t-1} + beta_t sum_r v_{t-1,r} k_{t-1,r}^T
//                           + gamma_t sum_r v_t,r k_t,r^T           S is (P, N)
//                     o_t,r = S_t q_t,r + D v_t,r
//                   alpha = exp(A dt), beta = (1 - lam) dt alpha, gamma = lam dt
//   mamba3_output   o -> y: the gate (or per-rank norm and gate) and the MIMO
//                   down-projection.
// Shape letters: B batch, L length, H heads, P head channels, N state size,
// G groups, R MIMO rank (1 for SISO), S rotary angles. The scan's tensors are
// head-major, (B, H, L, R, .), so that each (b, h) is one run of L*R rows.
// Backends choose their algorithm: the chunked form for prefill, the
// sequential recurrence for L = 1 and as the reference.
#pragma once

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

enum class RotaryPairs {
  kAdjacent,  // angle j rotates entries (2j, 2j+1): SISO
  kHalves,    // angle j rotates entries (j, j + N/2): MIMO
};

struct Mamba3PrepareArgs {
  int64_t heads = 0, groups = 1, rank = 1;  // H, G, R (P, N, S follow from the tensors)
  RotaryPairs pairs = RotaryPairs::kAdjacent;
  float A_floor = 1e-4f;
  float norm_eps = 1e-5f;

  // Column blocks of the in_proj output, each (B, L, width) rows.
  Tensor x;     // H*P: x[.., h*P + p]
  Tensor B;     // R*G*N raw (before norm and bias): B[.., (r*G + g)*N + n]
  Tensor C;     // like B
  Tensor ddt;   // H
  Tensor ddA;   // H
  Tensor trap;  // H
  Tensor ang;   // S

  Tensor dt_bias;  // (H)
  Tensor B_norm;   // (N) RMSNorm weights of B and C
  Tensor C_norm;   // (N)
  Tensor B_bias;   // (H, R, N)
  Tensor C_bias;   // (H, R, N)
  Tensor mimo_x;   // (H, R, P), or undefined for v = x (SISO)

  // (B, H, S) dense: the phase before t = 0 on entry, after t = L-1 on return.
  Tensor phase;

  // Outputs, dense. Per row, shared by the heads:
  Tensor B_normed;  // (B, L, R*G*N) RMSNorm_N(B) * B_norm
  Tensor C_normed;  // (B, L, R*G*N) RMSNorm_N(C) * C_norm
  Tensor ang_rate;  // (B, L, S) pi * tanh(ang): phase advance per unit dt
  // Per head:
  Tensor dt;      // (B, H, L) softplus(ddt + dt_bias)
  Tensor A;       // (B, H, L) min(-f(ddA), -A_floor), f the heavy tail
  Tensor lam;     // (B, H, L) sigmoid(trap)
  Tensor q;       // (B, H, L, R, N) C normed, + C_bias, rotated by the phase
  Tensor k;       // (B, H, L, R, N) B normed, + B_bias, rotated by the phase
  Tensor v;       // (B, H, L, R, P) x * mimo_x
  Tensor phases;  // (B, H, L, S) the phase used at every step; undefined: not kept
};
void mamba3_prepare(Context& ctx, const Mamba3PrepareArgs& a);

struct Mamba3PrepareBackwardArgs {
  // The forward's arguments after it ran: inputs, and outputs dt, lam, q, k
  // (rotated), B_normed, C_normed, ang_rate and phases (which must be kept).
  Mamba3PrepareArgs fwd;
  // Gradients of the prepare outputs, dense in their layouts. dq and dk are
  // read, then overwritten with the gradients of q and k before rotation.
  Tensor dq, dk, dv, ddt, dA, dlam;
  // Overwritten: gradients of the in_proj column blocks, like fwd.x, fwd.B, ...
  Tensor dx, dB, dC, dddt, dddA, dtrap, dang;
  // Parameter gradients, accumulated; undefined: not wanted.
  Tensor ddt_bias, dB_norm, dC_norm, dB_bias, dC_bias, dmimo_x;
};
void mamba3_prepare_backward(Context& ctx, const Mamba3PrepareBackwardArgs& a);

struct Mamba3ScanArgs {
  int64_t chunk = 64;  // rows (time steps x rank) per chunk, for the chunked form
  Tensor q;    // (B, H, L, R, N)
  Tensor k;    // (B, H, L, R, N)
  Tensor v;    // (B, H, L, R, P)
  Tensor dt;   // (B, H, L)
  Tensor A;    // (B, H, L), negative
  Tensor lam;  // (B, H, L)
  Tensor D;    // (H), or undefined
  Tensor o;    // (B, H, L, R, P) written: S_t q_t,r + D v_t,r
  // The decode state, read before t = 0 and replaced by the state after
  // L-1; a fresh sequence has all three zero. Undefined: fresh, dropped.
  Tensor ssm;     // (B, H, P, N)
  Tensor k_prev;  // (B, H, R, N): k of the last step
  Tensor v_prev;  // (B, H, R, P): v of the last step
  // The state's products (the carried state into o, each chunk into the
  // state) and the chunk's (its scores and their product with v) may round
  // their inputs to BF16 and sum in F32: set by a layer whose projections
  // run in BF16, for inference. A backend without such products, and every
  // backward, computes in F32 as without it.
  bool bf16_state_products = false;
};
void mamba3_scan(Context& ctx, const Mamba3ScanArgs& a);

// mamba3_prepare then mamba3_scan, for inference: scan's q, k, v, dt, A and
// lam must be prepare's. A backend with a fused kernel may keep q, k and v
// per head in its caches instead of writing them (their contents are then
// unspecified afterwards); every other output is as the two ops give it, to
// the bit. Backends without one run the two ops. prepare.phases must be
// undefined (training keeps q, k and v and runs the two ops).
struct Mamba3PrepareScanArgs {
  Mamba3PrepareArgs prepare;
  Mamba3ScanArgs scan;
};
void mamba3_prepare_scan(Context& ctx, const Mamba3PrepareScanArgs& a);

struct Mamba3ScanBackwardArgs {
  // The forward's inputs; fwd.o is unused; fwd.ssm, k_prev, v_prev are the
  // state before t = 0, read only (undefined: fresh). The final state gets
  // no gradient and none is returned for the starting state.
  Mamba3ScanArgs fwd;
  Tensor d_o;  // (B, H, L, R, P)
  // Overwritten, like the matching inputs.
  Tensor dq, dk, dv, ddt, dA, dlam;
  Tensor dD;  // (H) accumulated; undefined: not wanted
};
void mamba3_scan_backward(Context& ctx, const Mamba3ScanBackwardArgs& a);

struct Mamba3OutputArgs {
  int64_t rank = 1;  // R
  Tensor o;       // (B, H, L, R, P) from the scan
  Tensor z;       // (B, L, H*P) rows: in_proj's z columns
  Tensor mimo_z;  // (H, R, P), or undefined: zr = z (SISO)
  Tensor mimo_o;  // (H, R, P), or undefined: y = o (SISO)
  // is_outproj_norm: o_r <- RMSNorm_P(o_r) * norm[h*P:(h+1)*P] before the
  // gate; undefined for the plain gate.
  Tensor norm;  // (H*P)
  float norm_eps = 1e-5f;
  Tensor y;  // (B, L, H*P) rows: y_h = sum_r gated o_r * mimo_o[h, r]
};
void mamba3_output(Context& ctx, const Mamba3OutputArgs& a);

struct Mamba3OutputBackwardArgs {
  Mamba3OutputArgs fwd;  // the forward's inputs (fwd.y unused)
  Tensor dy;   // like fwd.y
  Tensor d_o;  // like fwd.o, overwritten
  Tensor dz;   // like fwd.z, overwritten
  Tensor dmimo_z, dmimo_o, dnorm;  // accumulated; undefined: not wanted
};
void mamba3_output_backward(Context& ctx, const Mamba3OutputBackwardArgs& a);

}  // namespace ssm::ops

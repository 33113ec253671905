// The Mamba-2 selective state-space model (SPEC §3) in two ops:
//   ssd_prepare  dt = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max),
//                A  = -exp(A_log)
//   ssd_scan     per batch row b and head h (group g = h / (H/G)):
//                  S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T     S is (P, N)
//                  y_t = S_t C_t + D x_t
// Shape letters: B batch, L length, H heads, P head channels, N state size,
// G groups. Heads (and groups) are contiguous blocks of P (N) channels in a
// row. Backends choose their algorithm: the chunked SSD form for prefill, a
// step kernel for L = 1, the plain recurrence in double as the reference.
#pragma once

#include <limits>

#include "ssm/ops/context.h"
#include "ssm/tensor/tensor.h"

namespace ssm::ops {

struct SsdPrepareArgs {
  Tensor dt_raw;   // (B, L, H) rows: in_proj's dt columns
  Tensor dt_bias;  // (H)
  Tensor A_log;    // (H)
  float dt_min = 0.f, dt_max = std::numeric_limits<float>::infinity();
  Tensor dt;  // (B, L, H) rows, written
  Tensor A;   // (H), written
};
void ssd_prepare(Context& ctx, const SsdPrepareArgs& a);

struct SsdPrepareBackwardArgs {
  Tensor dt_raw, dt_bias, A_log;  // the forward's inputs
  float dt_min = 0.f, dt_max = std::numeric_limits<float>::infinity();
  Tensor ddt;      // (B, L, H) rows: gradient of dt
  Tensor dA;       // (H): gradient of A
  Tensor ddt_raw;  // (B, L, H) rows, overwritten (0 where the clamp is active)
  Tensor ddt_bias;  // (H) accumulated; undefined: not wanted
  Tensor dA_log;    // (H) accumulated; undefined: not wanted
};
void ssd_prepare_backward(Context& ctx, const SsdPrepareBackwardArgs& a);

struct SsdScanArgs {
  int64_t groups = 1;  // G
  int64_t chunk = 256;  // Q, for the chunked form (the result does not depend on it)
  Tensor x;   // (B, L, H*P) rows
  Tensor B;   // (B, L, G*N) rows
  Tensor C;   // (B, L, G*N) rows
  Tensor dt;  // (B, L, H) rows, after ssd_prepare
  Tensor A;   // (H), negative
  Tensor D;   // (H), or undefined
  Tensor y;   // (B, L, H*P) rows, written
  // (B, H, P, N) dense: the state before t = 0 on entry, after t = L-1 on
  // return. Undefined: a fresh sequence, final state dropped.
  Tensor state;
  // The state's products (the carried state into y, each chunk into the
  // state) may round their inputs to BF16 and sum in F32: set by a layer
  // whose projections run in BF16 (their inputs are rounded so already).
  // A backend without such products computes in F32 as without it.
  bool bf16_state_products = false;
};
void ssd_scan(Context& ctx, const SsdScanArgs& a);

struct SsdScanBackwardArgs {
  SsdScanArgs fwd;  // the forward's inputs; fwd.state is the state before t = 0 (read only;
                    // undefined: zero) and fwd.y is unused
  Tensor dy;  // (B, L, H*P) rows; the final state receives no gradient
  Tensor dx;  // like x, overwritten
  Tensor dB;  // like B, overwritten
  Tensor dC;  // like C, overwritten
  Tensor ddt;  // like dt, overwritten
  Tensor dA;   // (H) accumulated
  Tensor dD;   // (H) accumulated; undefined: not wanted
};
void ssd_scan_backward(Context& ctx, const SsdScanBackwardArgs& a);

// A Mamba-2 decode step between the two projections (one token per
// sequence, with states): what conv1d (SiLU, state), ssd_prepare, ssd_scan
// and gated_rms_norm compute in that order, as one op so that a backend can
// fuse them into few launches (decoding is launch-bound on a GPU). The
// inputs are in_proj's column blocks of one row per sequence; the
// intermediates (xBC after the convolution, dt, A, the scan's y) are not
// kept, so training and prefill use the four ops.
struct SsdStepArgs {
  int64_t groups = 1;   // G
  Tensor z;             // (B, 1, H*P) rows: the gate
  Tensor xbc;           // (B, 1, H*P + 2*G*N) rows: [x | B | C] before the convolution
  Tensor dt_raw;        // (B, 1, H) rows
  Tensor conv_weight;   // (H*P + 2*G*N, 1, K)
  Tensor conv_bias;     // (H*P + 2*G*N), or undefined
  Tensor conv_state;    // (B, K-1, H*P + 2*G*N) dense, updated
  Tensor dt_bias;       // (H)
  Tensor A_log;         // (H)
  float dt_min = 0.f, dt_max = std::numeric_limits<float>::infinity();
  Tensor D;             // (H), or undefined
  Tensor norm_weight;   // (H*P), or undefined: out = y SiLU(z)
  int64_t norm_group = 0;  // channels normalised together (0: all)
  float eps = 1e-5f;
  bool norm_before_gate = false;
  Tensor state;         // (B, H, P, N) dense, updated
  Tensor out;           // (B, 1, H*P) rows, written
  // false: out = y + D x as ssd_scan gives it, neither gated nor normalised
  // (the norm fields unused): the caller applies gated_rms_norm itself, as
  // ops::norm_linear fused into the out projection.
  bool gated = true;
};
void ssd_step(Context& ctx, const SsdStepArgs& a);
// True when ctx's backend has its own ssd_step (the layer calls the op only
// then; elsewhere it runs the four ops itself).
bool has_ssd_step(const Context& ctx);

}  // namespace ssm::ops

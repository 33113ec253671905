// The Mamba-3 mixer's math (SPEC §4) between in_proj and out_proj, as three
// ops whose argument structs name every intermediate, so that a backward
// pass can reuse them:
//   mamba3_prepare  in_proj segments -> dt, A, lam, q, k, v (and the phase)
//   mamba3_scan     the trapezoidal recurrence, per batch row b and head h:
//                     S_t = alpha_t S_{t-1} + beta_t sum_r v_{t-1,r} k_{t-1,r}^T
//                           + gamma_t sum_r v_t,r k_t,r^T          S is (P, N)
//                     o_t,r = S_t q_t,r + D v_t,r
//                   with alpha = exp(A dt), beta = (1 - lam) dt alpha,
//                   gamma = lam dt. Two implementations of one signature:
//                   the chunked form for prefill (cpu/) and the sequential
//                   step form (ref/), which is the oracle and what decoding
//                   runs.
//   mamba3_output   o -> y: gate (or per-rank norm and gate), MIMO down-projection.
// Shape letters: B batch, L length, H heads, P headdim, N d_state, G groups,
// R MIMO rank (1 for SISO), S_ang rotary angles. The scan's tensors are
// head-major, (B, H, L, R, .), so that each (b, h) is one contiguous run of
// L*R rows, one row per (time, rank) pair.
#pragma once

#include <cstdint>

#include "ssm/core/thread_pool.h"
#include "ssm/ops/rotary.h"

namespace ssm::ops {

struct Mamba3PrepareArgs {
  int64_t batch = 0, length = 0;                                      // B, L
  int64_t heads = 0, headdim = 0, d_state = 0, groups = 1, rank = 1;  // H, P, N, G, R
  int64_t n_angles = 0;                                               // S_ang
  RotaryPairs pairs = RotaryPairs::kAdjacent;  // SISO: adjacent; MIMO: halves (N/2 apart)

  // Segments of the in_proj output; element (b, t, ...) lives at row b*L + t
  // times the shared row stride ld.
  const float* x = nullptr;     // x[row*ld + h*P + p]
  const float* B = nullptr;     // B[row*ld + (r*G + g)*N + n], raw (before norm and bias)
  const float* C = nullptr;     // like B
  const float* ddt = nullptr;   // ddt[row*ld + h]
  const float* ddA = nullptr;   // ddA[row*ld + h]
  const float* trap = nullptr;  // trap[row*ld + h]
  const float* ang = nullptr;   // ang[row*ld + j], j < S_ang
  int64_t ld = 0;

  const float* dt_bias = nullptr;  // (H)
  const float* B_norm = nullptr;   // (N) RMSNorm weights of B and C
  const float* C_norm = nullptr;
  const float* B_bias = nullptr;  // (H, R, N)
  const float* C_bias = nullptr;  // (H, R, N)
  const float* mimo_x = nullptr;  // (H, R, P), or null for v = x (SISO)
  float A_floor = 1e-4f;
  float norm_eps = 1e-5f;

  // (B, H, S_ang): the phase before t=0 on entry, after t=L-1 on return.
  float* phase = nullptr;

  // Outputs. Per row, shared by the heads:
  float* B_normed = nullptr;  // (B*L, R*G*N) RMSNorm_N(B) * B_norm
  float* C_normed = nullptr;  // (B*L, R*G*N) RMSNorm_N(C) * C_norm
  float* ang_rate = nullptr;  // (B*L, S_ang) pi * tanh(ang): phase advance per unit dt
  // Per head:
  float* dt = nullptr;      // (B, H, L) softplus(ddt + dt_bias)
  float* A = nullptr;       // (B, H, L) min(-f(ddA), -A_floor), f the heavy tail
  float* lam = nullptr;     // (B, H, L) sigmoid(trap)
  float* q = nullptr;       // (B, H, L, R, N) C normed, + C_bias, rotated by the phase
  float* k = nullptr;       // (B, H, L, R, N) B normed, + B_bias, rotated by the phase
  float* v = nullptr;       // (B, H, L, R, P) x * mimo_x
  float* phases = nullptr;  // optional (B, H, L, S_ang): the phase used at every step
};

// Parallel over rows for the shared parts, then over (b, h), each walking
// its phase through time.
void mamba3_prepare(const Mamba3PrepareArgs& a, ThreadPool& pool);

struct Mamba3ScanArgs {
  int64_t batch = 0, length = 0;                          // B, L
  int64_t heads = 0, headdim = 0, d_state = 0, rank = 1;  // H, P, N, R
  int64_t chunk = 64;  // rows (time steps x rank) per chunk; chunked form only

  const float* q = nullptr;    // (B, H, L, R, N)
  const float* k = nullptr;    // (B, H, L, R, N)
  const float* v = nullptr;    // (B, H, L, R, P)
  const float* dt = nullptr;   // (B, H, L)
  const float* A = nullptr;    // (B, H, L), negative
  const float* lam = nullptr;  // (B, H, L)
  const float* D = nullptr;    // (H) or null

  float* o = nullptr;  // (B, H, L, R, P) output: S_t q_t,r + D v_t,r

  // The decode state, read before t=0 and replaced by the state after L-1.
  // A fresh sequence has all three zero (no previous k and v).
  float* ssm = nullptr;     // (B, H, P, N)
  float* k_prev = nullptr;  // (B, H, R, N): k of the last step
  float* v_prev = nullptr;  // (B, H, R, P): v of the last step
};

// Chunked form: the trapezoid folded into the SSD form (SPEC §4) with
// matrix products inside chunks. Parallel over (b, h).
void mamba3_scan_chunked(const Mamba3ScanArgs& a, ThreadPool& pool);

// The recurrence one step at a time, in fp32. It allocates nothing, so it
// is also the decode path. Parallel over (b, h).
void mamba3_scan_sequential(const Mamba3ScanArgs& a, ThreadPool& pool);

struct Mamba3OutputArgs {
  int64_t batch = 0, length = 0;             // B, L
  int64_t heads = 0, headdim = 0, rank = 1;  // H, P, R
  const float* o = nullptr;                  // (B, H, L, R, P) from the scan
  const float* z = nullptr;                  // z[row*ld_z + h*P + p], row = b*L + t
  int64_t ld_z = 0;
  const float* mimo_z = nullptr;  // (H, R, P), or null for zr = z (SISO)
  const float* mimo_o = nullptr;  // (H, R, P), or null for y = o (SISO)
  // is_outproj_norm: o_r <- RMSNorm_P(o_r) * norm[h*P:(h+1)*P] before the
  // gate; null for the plain gate.
  const float* norm = nullptr;  // (H*P)
  float norm_eps = 1e-5f;
  float* y = nullptr;  // y[row*ld_y + h*P + p] = sum_r gated o_r * mimo_o[h, r]
  int64_t ld_y = 0;
};

// Parallel over rows b*L + t.
void mamba3_output(const Mamba3OutputArgs& a, ThreadPool& pool);

}  // namespace ssm::ops

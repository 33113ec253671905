// The per-head work of a decode step (L = 1) of the Mamba-2 and Mamba-3
// recurrences, vectorised (Highway, chosen at run time for the CPU). The
// state is read and written once per step: for each row p of a head's state,
// one pass over its N entries applies the decay and the rank-1 updates and
// forms the dot products of the output, with one vector of partial sums per
// output. The sums are formed in the same lane-wise order wherever the head
// sits and whatever the thread, so results depend neither on the batch nor on
// the thread count.
//
// A state stored in BF16 (S16 set, S unused): each vector of a row is
// widened exactly to F32 as it is loaded, computed with as an F32 state is,
// and rounded to nearest even (NaN kept quiet) as it is stored, so that the
// state is read and written in BF16 with no F32 copy of it.
#pragma once

#include <cstdint>

namespace ssm::cpu {

// Mamba-2 (SSD), one head: for p < P, with S row-major (P, N),
//   S[p] <- decay S[p] + (x[p] dt) B,   y[p] = S[p] . C + d x[p].
struct SsdStepHead {
  int64_t P, N;
  float dt, decay, d;
  const float *x, *B, *C;
  float *y, *S;
  uint16_t *S16 = nullptr;  // a BF16 state instead of S
};
void ssd_step_head(const SsdStepHead &h);

// Mamba-3, one head of rank R: for p < P, with S row-major (P, N),
//   S[p] <- alpha S[p] + sum_r (beta v_prev[r][p] k_prev[r] + gamma v[r][p] k[r]),
//   o[r][p] = S[p] . q[r] + D v[r][p].
// k_prev, q and k are (R, N); v_prev, v and o are (R, P).
struct Mamba3StepHead {
  int64_t P, N, R;
  float alpha, beta, gamma, D;
  const float *q, *k, *v, *k_prev, *v_prev;
  float *o, *S;
  uint16_t *S16 = nullptr;  // a BF16 state instead of S
};
void mamba3_step_head(const Mamba3StepHead &h);

}  // namespace ssm::cpu

// The chunked scan shared by ssd_scan (Mamba-2) and mamba3_scan (Mamba-3,
// SISO and MIMO) on the GPU, in plain types like launch.h. Both maps are
//   S_t = exp(a_t) S_{t-1} + (terms of step t),  o_t,r = S_t q_t,r + D v_t,r
// and in the chunked form of docs/MATH.md the contribution of row (s, r') to
// row (t, r) is (q_t,r . k_s,r') v_s,r' times
//   exp(cum_t - cum_s) w_s   for s < t,     wd_s   for s = t,
// cum being the running sum of a. SSD: a = dt A, w = wd = dt. Mamba-3:
// a = A dt, wd = lam dt, w = lam dt + (1 - lam_{s+1}) dt_{s+1} (the
// trapezoid's previous-step term folded into the step it came from).
#pragma once

#include "ops/cuda/launch.h"

namespace ssm::cuda {

// Element (b, h, t, r, i) at p[b sb + (h / hdiv) sh + t st + r sr + i].
struct ScanView {
  const float* p = nullptr;
  int64_t sb = 0, sh = 0, st = 0, sr = 0, hdiv = 1;
};
struct ScanOut {
  float* p = nullptr;
  int64_t sb = 0, sh = 0, st = 0, sr = 0;
};

struct ChunkScanLaunch {
  int64_t B = 0, H = 0, L = 0, R = 1, N = 0, P = 0;
  ScanView q, k, v;          // q, k: N entries; v: P entries
  ScanOut o;                 // P entries
  const float* D = nullptr;  // (H) or null
  // Prepared per (b, h, t), dense (B, H, L): a, w, wd (prepare_* below).
  const float *la = nullptr, *w = nullptr, *wd = nullptr;
  // (B, H, P, N): the state before t = 0 on entry, after t = L-1 on return; or null.
  StatePtr state;
  // Mamba-3 with a state: the pending previous-step term added to the state
  // first, pend[b, h] sum_r v_prev[b, h, r] k_prev[b, h, r]^T (each dense).
  const float *pend = nullptr, *k_prev = nullptr, *v_prev = nullptr;
  // Scratch: (B, H, chunks, P, N) chunk states and (B, H, chunks) chunk decays.
  float *chunk_states = nullptr, *chunk_decay = nullptr;
  // Products as 3xTF32 (the F32 recurrence to ~1e-6); false: one TF32
  // product each, for a context that rounds its products
  // (CudaResources::rounds_products).
  bool split = true;
  // Heads an output block takes, forced (CudaResources::scan_heads); 0: the
  // launch chooses.
  int forced_heads = 0;
};

// Time steps per chunk (64 rows of (time, rank)) and the number of chunks.
int64_t chunk_scan_steps(int64_t R);
int64_t chunk_scan_chunks(int64_t L, int64_t R);
// Whether the kernels take these sizes (shared memory; else the sequential scan).
bool chunk_scan_fits(int64_t R, int64_t N, int64_t P);

// la, w, wd of SSD from dt rows (B*L rows of H) and A (H).
void launch_chunk_prepare_ssd(ConstRows dt, const float* A, int64_t B, int64_t L, float* la,
                              float* w, float* wd, cudaStream_t s);
// la, w, wd and pend of Mamba-3 from dt, A, lam (B, H, L).
void launch_chunk_prepare_mamba3(const float* dt, const float* A, const float* lam, int64_t B,
                                 int64_t H, int64_t L, float* la, float* w, float* wd, float* pend,
                                 cudaStream_t s);
void launch_chunk_scan(const ChunkScanLaunch& a, cudaStream_t s);

}  // namespace ssm::cuda

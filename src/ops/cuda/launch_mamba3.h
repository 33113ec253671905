// The Mamba-3 launchers of the cuda backend (mamba3.cu), in plain types like
// launch.h: the three forward ops of the mixer (SPEC §4), prefill and the
// decode step alike. Every tensor is F32; the per-row inputs are column
// blocks of in_proj's output (ConstRows), everything else is dense.
#pragma once

#include "ops/cuda/launch.h"

namespace ssm::cuda {

// The Mamba-3 kernels keep per-rank values in fixed arrays of this size.
inline constexpr int kMamba3MaxRank = 16;

// Each op's sizes and inputs, which its forward and its backward
// (launch_mamba3_attention_backward.h) both read: the launch structs below
// and the backward's extend them, filled from the op's arguments by
// mamba3_launch_inputs.h.
struct Mamba3PrepareInputs {
  int64_t B = 0, L = 0, H = 0, P = 0, N = 0, G = 1, R = 1, S = 0;
  bool halves = false;  // rotary pairs (j, j + N/2) (MIMO), else (2j, 2j + 1)
  float A_floor = 0, norm_eps = 0;
  ConstRows x, Bm, C, ddt, ddA, trap, ang;  // B*L rows each
  const float *dt_bias = nullptr, *B_norm = nullptr, *C_norm = nullptr;
  const float* mimo_x = nullptr;  // may be null
};

struct Mamba3PrepareLaunch : Mamba3PrepareInputs {
  const float *B_bias = nullptr, *C_bias = nullptr;
  float* phase = nullptr;                                              // (B, H, S) in and out
  float *B_normed = nullptr, *C_normed = nullptr, *ang_rate = nullptr;  // (B, L, .)
  float *dt = nullptr, *A = nullptr, *lam = nullptr;                    // (B, H, L)
  float *q = nullptr, *k = nullptr, *v = nullptr;                       // (B, H, L, R, .)
  float* phases = nullptr;  // (B, H, L, S): the phase of every step (the op's or scratch)
  // Launched overlapped (overlap_launch.h: a decode step's chain of small
  // kernels); so are the scan's and the output's below.
  bool overlap = false;
};
void launch_mamba3_prepare(const Mamba3PrepareLaunch& a, cudaStream_t s);

struct Mamba3ScanInputs {
  int64_t B = 0, H = 0, L = 0, R = 1, N = 0, P = 0;
  const float *q = nullptr, *k = nullptr, *v = nullptr;     // (B, H, L, R, .)
  const float *dt = nullptr, *A = nullptr, *lam = nullptr;  // (B, H, L)
  const float* D = nullptr;                                 // (H) or null
};

struct Mamba3ScanLaunch : Mamba3ScanInputs {
  float* o = nullptr;  // (B, H, L, R, P)
  // All three or none (a fresh sequence, state dropped).
  StatePtr ssm;
  float *k_prev = nullptr, *v_prev = nullptr;
  bool overlap = false;
  // A SISO decode step of many sequences may take the streamed state step
  // (mamba3_scan_step.cu; CudaResources::stream_state_step).
  bool stream_state = false;
};
// Shared memory the scan needs for one time step (bytes); the launcher
// takes N and R whose one step fits in 48 KiB.
int64_t mamba3_scan_step_bytes(int64_t R, int64_t N);
void launch_mamba3_scan(const Mamba3ScanLaunch& a, cudaStream_t s);
// Whether the shape and memory suit mamba3_scan_step.cu's kernel (L = 1,
// R = 1, N a multiple of 8 up to 256, the state and k, q, k_prev 16-byte
// aligned, stream_state); launch_mamba3_scan takes it where it would take
// scan_kernel's wide blocks. W: the lanes a state row.
bool mamba3_scan_streams(const Mamba3ScanLaunch& a);
// Whether launch_mamba3_scan takes that streamed step for a (many
// sequences: its wide-block rule), where the fused decode step
// (mamba3_step.cu, a block per (b, h)) would keep one block a multiprocessor.
bool mamba3_scan_streams_wide(const Mamba3ScanLaunch& a);
void launch_mamba3_scan_step(const Mamba3ScanLaunch& a, int W, cudaStream_t s);
// k_prev, v_prev <- the k and v of step L-1 (after a scan; nothing without a state).
void launch_mamba3_last_step(const Mamba3ScanLaunch& a, cudaStream_t s);

// mamba3_prepare then mamba3_scan at L = 1 in one launch (mamba3_step.cu),
// for inference: prepare's q, k, v and phases are not written (nor read),
// the rest of both launches' outputs are, as the two ops write them. Fits:
// N <= 1024 and the block's shared memory (R (3 N + 2 P) + 2 S floats)
// within 48 KiB.
bool mamba3_step_fits(int64_t R, int64_t N, int64_t P, int64_t S);
void launch_mamba3_step(const Mamba3PrepareLaunch& prepare, const Mamba3ScanLaunch& scan, cudaStream_t s);

struct Mamba3OutputInputs {
  int64_t B = 0, L = 0, H = 0, R = 1, P = 0;
  const float* o = nullptr;  // (B, H, L, R, P)
  ConstRows z;               // B*L rows of H*P
  const float *mimo_z = nullptr, *mimo_o = nullptr, *norm = nullptr;  // each may be null
  float norm_eps = 0;
};

struct Mamba3OutputLaunch : Mamba3OutputInputs {
  Rows y;  // B*L rows of H*P
  bool overlap = false;
};
void launch_mamba3_output(const Mamba3OutputLaunch& a, cudaStream_t s);

}  // namespace ssm::cuda

// The launchers of the Mamba-3 and attention backward ops on the GPU, in
// plain types like launch.h. As in launch_train.h every reduction has a
// fixed order (no atomics): a parameter's gradient is built from per-row
// contributions written to scratch, then summed by launch_sum_rows.
#pragma once

#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/launch_train.h"

namespace ssm::cuda {

// dst[c] += sum over the rows of src, in a fixed order: kPartialRows
// contiguous row ranges first (partial: kPartialRows x src.cols of scratch,
// written here), then those partial rows in order.
void launch_sum_rows(ConstRows src, float* partial, float* dst, cudaStream_t s);
// The same sum over the rows (b, t) of a (B, H, L, n) tensor read as B*L
// rows of H*n columns ((h, i) at column h*n + i), in place: no copy of it
// into rows first (mamba3_prepare's bias gradients from dk and dq).
void launch_sum_head_rows(const float* src, int64_t B, int64_t L, int64_t H, int64_t n,
                          float* partial, float* dst, cudaStream_t s);

// mamba3_output backward (ops/mamba3.h). The parameter gradients' per-row
// contributions (each may be null: not wanted): cz and co (B*L rows of
// H*R*P, for mimo_z and mimo_o), cn (B*L rows of H*P, for norm).
struct Mamba3OutputBackwardLaunch : Mamba3OutputInputs {
  ConstRows dy;          // B*L rows of H*P
  float* d_o = nullptr;  // (B, H, L, R, P), written
  Rows dz;               // B*L rows of H*P, written
  float *cz = nullptr, *co = nullptr, *cn = nullptr;
};
void launch_mamba3_output_backward(const Mamba3OutputBackwardLaunch& a, cudaStream_t s);

// mamba3_scan backward in the chunked form (mamba3_scan_backward.cu):
// parallel over (b, h, chunk of T steps), two short passes over the chunks
// for the states that cross chunk boundaries.
struct Mamba3ScanBackwardLaunch : Mamba3ScanInputs {
  const float *ssm = nullptr, *k_prev = nullptr, *v_prev = nullptr;  // all or none
  const float* d_o = nullptr;                                        // (B, H, L, R, P)
  float *dq = nullptr, *dk = nullptr, *dv = nullptr;                 // written
  float *ddt = nullptr, *dA = nullptr, *dlam = nullptr;              // written
  float* dD = nullptr;                                               // (H) accumulated, or null
  int64_t T = 0;  // steps per chunk, from mamba3_backward_steps
  // Products F32-exact (the general kernels, sums in double); false when
  // the context rounds its products (CudaResources::rounds_products): the
  // chunk passes on the tensor cores, one TF32 product each, where they fit.
  bool split = true;
  // Scratch of mamba3_scan_backward_scratch floats.
  float* scratch = nullptr;
};
// Steps per chunk: 64 rows of (time, rank), fewer where the chunk's tiles
// would not fit in shared memory (split: Mamba3ScanBackwardLaunch::split).
int64_t mamba3_backward_steps(int64_t R, int64_t P, int64_t N, bool split);
int64_t mamba3_scan_backward_scratch(int64_t B, int64_t H, int64_t L, int64_t P, int64_t N,
                                     int64_t T);
void launch_mamba3_scan_backward(const Mamba3ScanBackwardLaunch& a, cudaStream_t s);
// Its passes 1 and 3 on the tensor cores (mamba3_scan_backward_tiles.cu),
// for chunks of 64 rows (64 % R == 0) where the tiles of (P, N) fit shared
// memory; used when the context rounds its products (split false) only.
bool mamba3_backward_tiles_fit(int64_t R, int64_t P, int64_t N);
void launch_mamba3_chunk_sums_tiles(const Mamba3ScanBackwardLaunch& a, cudaStream_t s);
void launch_mamba3_chunk_backward_tiles(const Mamba3ScanBackwardLaunch& a, cudaStream_t s);

// mamba3_prepare backward. dq and dk are un-rotated in place.
struct Mamba3PrepareBackwardLaunch : Mamba3PrepareInputs {
  const float *q = nullptr, *k = nullptr, *phases = nullptr;  // the forward's outputs
  float *dq = nullptr, *dk = nullptr;                         // read, then un-rotated
  const float *dv = nullptr, *d_dt = nullptr, *dA = nullptr, *dlam = nullptr;  // the scan's gradients
  Rows dx, dB, dC, dddt, dddA, dtrap, dang;  // written
  // Scratch: dphase (B*H*L*S).
  float* dphase = nullptr;
  // Per-row contributions of the parameter gradients, null when not wanted:
  // cBn, cCn (B*L*R*G rows of N), cmx (B*L rows of H*R*P).
  float *cBn = nullptr, *cCn = nullptr, *cmx = nullptr;
};
void launch_mamba3_prepare_backward(const Mamba3PrepareBackwardLaunch& a, cudaStream_t s);

// attention backward (ops/attention.h), fresh sequences; stats: scratch of
// 3 B H L floats (each query's statistics: the flash kernels' logsumexp and
// rowsum(dO o O); the plain kernels' score maximum, 1 / softmax sum and
// rowsum(dO o O)).
struct AttentionBackwardLaunch {
  int64_t B = 0, L = 0, H = 0, Hkv = 0, hd = 0;
  float scale = 1.f;
  // Products F32-exact (the 3xTF32 split); false when the context rounds
  // its products: one TF32 product each (the flash kernels, head dims <= 128).
  bool split = true;
  ConstRows q, out, dout;                  // B*L rows, head h at columns h*hd
  const float *k = nullptr, *v = nullptr;  // (B, Hkv, L, hd)
  Rows dq, dk, dv;                         // B*L rows
  float* stats = nullptr;
};
void launch_attention_backward(const AttentionBackwardLaunch& a, cudaStream_t s);

// rope_backward: dq (B*L rows, H heads) and dk (Hkv heads) rotated back by
// -position * inv_freq on their pairs (i, i + half), position = row % L.
void launch_rope_backward(Rows dq, Rows dk, int64_t L, int64_t H, int64_t Hkv, int64_t hd,
                          const float* inv_freq, int64_t half, cudaStream_t s);

}  // namespace ssm::cuda

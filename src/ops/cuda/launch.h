// The kernel launchers of the cuda backend, in plain types so that the .cu
// files (nvcc) need none of the engine's headers and the host wrappers
// (g++) none of CUDA's device code. Every launcher queues its kernels on
// `stream` and returns; a launch error is checked by the caller.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ssm::cuda {

// F32 rows: element (r, c) at p[r * stride + c].
struct Rows {
  float* p = nullptr;
  int64_t rows = 0, cols = 0, stride = 0;
};
struct ConstRows {
  const float* p = nullptr;
  int64_t rows = 0, cols = 0, stride = 0;
};

// A recurrent state (B, H, P, N) in global memory: F32, or BF16 (a model's
// --state-dtype bf16, ops/state_dtype.h), which the scans widen exactly on
// load and round to nearest even on store (state_memory.h); null: none.
struct StatePtr {
  void* p = nullptr;
  bool bf16 = false;
  explicit operator bool() const { return p != nullptr; }
};

inline constexpr int kMaxCopyDims = 8;
// dst[i] = src[i] over a shape, both with element strides, elements of
// elem_size bytes.
struct StridedCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  int ndim = 0;
  int64_t shape[kMaxCopyDims] = {};
  int64_t dst_stride[kMaxCopyDims] = {};
  int64_t src_stride[kMaxCopyDims] = {};
  int64_t numel = 0;
  int elem_size = 4;
};

void launch_add(Rows dst, ConstRows src, float alpha, cudaStream_t s);
void launch_scale(Rows t, float alpha, cudaStream_t s);
void launch_fill(Rows t, float value, cudaStream_t s);
void launch_copy(const StridedCopy& c, cudaStream_t s);
// *out (device) = sum of squares, in double.
void launch_sum_squares(ConstRows t, double* out, cudaStream_t s);
// y[r, :] += bias.
void launch_add_bias(Rows y, const float* bias, cudaStream_t s);
// `pieces` dense rows x cols 16-bit matrices (bf16 when bf16, else f16): the
// first x rounded to nearest even, each next one the rounded remainder.
void launch_to_16bit(ConstRows x, void* dst, bool bf16, int pieces, cudaStream_t s);

void launch_embedding(const void* ids, bool ids_i64, const float* table, Rows out, float scale,
                      cudaStream_t s);

// overlap: few rows (a block each) launched with programmatic dependent
// launch (overlap_launch.h), as the decode step's other kernels.
void launch_rms_norm(ConstRows x, const float* w, float eps, Rows out, cudaStream_t s, bool overlap = false);
// w null: out = y silu(z). group: channels normalised together.
void launch_gated_rms_norm(ConstRows y, ConstRows z, const float* w, int64_t group, float eps,
                           bool norm_before_gate, Rows out, cudaStream_t s, bool overlap = false);

struct Conv1dLaunch {
  ConstRows in;           // B*L rows of C
  const float* weight;    // (C, K)
  const float* bias;      // (C) or null
  float* state;           // (B, K-1, C) or null
  Rows out;
  int64_t B, L, C, K;
  bool silu;
};
void launch_conv1d(const Conv1dLaunch& a, cudaStream_t s);

void launch_ssd_prepare(ConstRows dt_raw, const float* dt_bias, const float* A_log, float dt_min,
                        float dt_max, Rows dt, float* A, cudaStream_t s);

struct SsdScanLaunch {
  int64_t B, L, H, P, N, G;
  ConstRows x, Bm, C, dt;  // (B*L) rows of H*P, G*N, G*N, H
  const float* A;          // (H)
  const float* D;          // (H) or null
  Rows y;
  StatePtr state;          // (B, H, P, N) or null
};
void launch_ssd_scan(const SsdScanLaunch& a, cudaStream_t s);

}  // namespace ssm::cuda

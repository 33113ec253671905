// The projection kernel of few rows (decode steps), in plain types like
// launch.h: y (M, N) (+)= x (M, K) W (N, K)^T (+ bias) for M <= kSkinnyRows,
// W in F32, BF16 or F16, read once at full width and widened exactly; the
// products and sums in F32. Memory-bound on W, where a GEMM library's
// tiles would be mostly empty.
#pragma once

#include "ops/cuda/launch.h"

namespace ssm::cuda {

inline constexpr int64_t kSkinnyRows = 8;

enum class WeightType { kF32, kBF16, kF16 };

struct SkinnyLinear {
  ConstRows x;
  const void* W = nullptr;  // (N, K) dense rows of w_stride elements
  int64_t w_stride = 0;
  WeightType type = WeightType::kF32;
  const float* bias = nullptr;
  Rows y;  // M x N
  bool accumulate = false;
  // Launched to start while the kernel before it finishes, its weights'
  // loads first (overlap_launch.h; CudaResources::overlap_launches).
  bool overlap = false;
  // The one-wave kernel where W fits in its registers (linear_skinny.cu):
  // SSM_CUDA_ONE_WAVE=1 (CudaResources::one_wave_projections).
  bool one_wave = false;
  // One row against many columns by stream_columns_kernel (the decode
  // step's head; CudaResources::stream_columns).
  bool stream_columns = false;
  // norm_linear (ssm/ops/linear.h): x's rows normalised as every block loads
  // them (each block recomputes the rows' sums of squares: a decode step's
  // few rows cost less than a launch), into shared memory.
  bool norm = false;
  ConstRows gate;                      // null p: rms_norm, else gated_rms_norm
  const float* norm_weight = nullptr;  // (K) or null
  int64_t norm_group = 0;              // > 0, divides K
  float eps = 0.f;
  bool norm_before_gate = false;
  // The norm at warp level (warp_norm_kernel: no shared memory, no
  // barrier), where skinny_warp_norm_fits (FusedDecode::kWarp).
  bool warp_norm = false;
  // At one row, a column's K split over several warps of a block
  // (split_k_kernel; FusedDecode::kSplit), where its pieces allow: the
  // warp-level norm's, or a plain projection's.
  bool split_k = false;
};
// Whether launch_skinny_linear takes a's norm: the normalised rows and their
// factors fit in 48 KB of shared memory.
bool skinny_norm_fits(const SkinnyLinear& a);
// Whether launch_skinny_linear runs a in one wave: every block resident at
// once, every weight load issued before the wait.
bool skinny_in_one_wave(const SkinnyLinear& a);
// Whether the warp-level norm takes a: one row, one norm group over all of
// K, 16-byte pieces of W, x, the gate and the weight.
bool skinny_warp_norm_fits(const SkinnyLinear& a);
void launch_skinny_linear(const SkinnyLinear& a, cudaStream_t s);

}  // namespace ssm::cuda

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
};
void launch_skinny_linear(const SkinnyLinear& a, cudaStream_t s);

}  // namespace ssm::cuda

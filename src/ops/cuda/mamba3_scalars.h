// The Mamba-3 prepare op's per-head scalars (SPEC §4: dt = softplus, lam =
// sigmoid, A's heavy tail), shared by mamba3_prepare.cu's heads and phase
// kernels and mamba3_step.cu's fused decode step, whose outputs must be
// theirs to the bit. The sigmoid's sum is rounded on its own (__fadd_rn):
// left to ptxas, the product that ends expf could be fused into it in one
// kernel and not in the other. The CPU emulator (no __CUDA_ARCH__, no FMA)
// adds plainly. Included by .cu files only.
#pragma once

namespace ssm::cuda {

inline constexpr float kMamba3Pi = 3.14159265358979323846f;

__device__ __forceinline__ float mamba3_add_rounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

__device__ __forceinline__ float mamba3_softplus(float x) {
  return x > 20.f ? x : (x < -20.f ? expf(x) : log1pf(expf(x)));
}

__device__ __forceinline__ float mamba3_sigmoid(float x) {
  return x >= 0.f ? 1.f / mamba3_add_rounded(1.f, expf(-x)) : expf(x) / mamba3_add_rounded(1.f, expf(x));
}

__device__ __forceinline__ float mamba3_heavy_tail(float v) { return v >= 0.f ? 1.f + v : 1.f / (1.f - v); }

}  // namespace ssm::cuda

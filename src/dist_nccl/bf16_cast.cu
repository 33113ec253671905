#include <cuda_bf16.h>

#include "dist_nccl/bf16_cast.h"
#include "ops/cuda/runtime.h"

namespace ssm::nccl {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? b : 65535 * 8);  // grid-stride beyond
}

__global__ void round_kernel(const float* x, __nv_bfloat16* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void widen_kernel(const __nv_bfloat16* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __bfloat162float(x[i]);
}

}  // namespace

void f32_to_bf16(const float* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  round_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, static_cast<__nv_bfloat16*>(y), n);
  cuda::check_launch("f32_to_bf16");
}

void bf16_to_f32(const void* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  widen_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), y, n);
  cuda::check_launch("bf16_to_f32");
}

}  // namespace ssm::nccl

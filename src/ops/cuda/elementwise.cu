// Whole-tensor kernels: residual adds, scaling, fills, strided copies, the
// sum of squares, bias adds and the 16-bit casts the projections use.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/cuda/launch.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

// Grid-stride over rows x cols: (r, c) from a flat index.
__global__ void add_kernel(Rows dst, ConstRows src, float alpha) {
  const int64_t n = dst.rows * dst.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / dst.cols, c = i % dst.cols;
    dst.p[r * dst.stride + c] += alpha * src.p[r * src.stride + c];
  }
}

__global__ void scale_kernel(Rows t, float alpha) {
  const int64_t n = t.rows * t.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    t.p[(i / t.cols) * t.stride + i % t.cols] *= alpha;
}

__global__ void fill_kernel(Rows t, float value) {
  const int64_t n = t.rows * t.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    t.p[(i / t.cols) * t.stride + i % t.cols] = value;
}

__global__ void add_bias_kernel(Rows y, const float* bias) {
  const int64_t n = y.rows * y.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y.p[(i / y.cols) * y.stride + i % y.cols] += bias[i % y.cols];
}

template <typename E>
__global__ void copy_kernel(StridedCopy c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < c.numel; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t rest = i, d_off = 0, s_off = 0;
    for (int d = c.ndim - 1; d >= 0; --d) {
      const int64_t k = rest % c.shape[d];
      rest /= c.shape[d];
      d_off += k * c.dst_stride[d];
      s_off += k * c.src_stride[d];
    }
    static_cast<E*>(c.dst)[d_off] = static_cast<const E*>(c.src)[s_off];
  }
}

// One block: each thread sums its share in double, then a tree in shared
// memory; a fixed order, so the result does not vary between runs.
__global__ void sum_squares_kernel(ConstRows t, double* out) {
  __shared__ double part[kThreads];
  const int64_t n = t.rows * t.cols;
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = t.p[(i / t.cols) * t.stride + i % t.cols];
    acc += v * v;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0];
}

__global__ void to_bf16_kernel(ConstRows x, __nv_bfloat16* dst) {
  const int64_t n = x.rows * x.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = __float2bfloat16_rn(x.p[(i / x.cols) * x.stride + i % x.cols]);
}

__global__ void to_f16_kernel(ConstRows x, __half* dst) {
  const int64_t n = x.rows * x.cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = __float2half_rn(x.p[(i / x.cols) * x.stride + i % x.cols]);
}

}  // namespace

void launch_add(Rows dst, ConstRows src, float alpha, cudaStream_t s) {
  add_kernel<<<blocks_for(dst.rows * dst.cols), kThreads, 0, s>>>(dst, src, alpha);
}
void launch_scale(Rows t, float alpha, cudaStream_t s) {
  scale_kernel<<<blocks_for(t.rows * t.cols), kThreads, 0, s>>>(t, alpha);
}
void launch_fill(Rows t, float value, cudaStream_t s) {
  fill_kernel<<<blocks_for(t.rows * t.cols), kThreads, 0, s>>>(t, value);
}
void launch_add_bias(Rows y, const float* bias, cudaStream_t s) {
  add_bias_kernel<<<blocks_for(y.rows * y.cols), kThreads, 0, s>>>(y, bias);
}
void launch_copy(const StridedCopy& c, cudaStream_t s) {
  const int b = blocks_for(c.numel);
  switch (c.elem_size) {
    case 1: copy_kernel<uint8_t><<<b, kThreads, 0, s>>>(c); break;
    case 2: copy_kernel<uint16_t><<<b, kThreads, 0, s>>>(c); break;
    case 4: copy_kernel<uint32_t><<<b, kThreads, 0, s>>>(c); break;
    default: copy_kernel<uint64_t><<<b, kThreads, 0, s>>>(c); break;
  }
}
void launch_sum_squares(ConstRows t, double* out, cudaStream_t s) {
  sum_squares_kernel<<<1, kThreads, 0, s>>>(t, out);
}
void launch_to_16bit(ConstRows x, void* dst, bool bf16, cudaStream_t s) {
  const int b = blocks_for(x.rows * x.cols);
  if (bf16) to_bf16_kernel<<<b, kThreads, 0, s>>>(x, static_cast<__nv_bfloat16*>(dst));
  else to_f16_kernel<<<b, kThreads, 0, s>>>(x, static_cast<__half*>(dst));
}

}  // namespace ssm::cuda

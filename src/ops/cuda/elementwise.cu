// Whole-tensor kernels: residual adds, scaling, fills, strided copies, the
// sum of squares, bias adds and the 16-bit casts the projections use.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ops/cuda/launch.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

// Rows over grid y, columns over grid x and the threads: no divisions per
// element (64-bit division is a long instruction sequence on the GPU).
dim3 grid_for(int64_t rows, int64_t cols) {
  const int64_t x = (cols + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(x < 1 ? 1 : (x > 64 ? 64 : x)),
              static_cast<unsigned>(rows < 1 ? 1 : (rows > 65535 ? 65535 : rows)));
}

#define FOR_EACH_ELEMENT(R, C)                                                  \
  for (int64_t r = blockIdx.y; r < (R); r += gridDim.y)                         \
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < (C); c += int64_t{gridDim.x} * blockDim.x)

// Grid-stride over rows x cols: (r, c) from a flat index.
__global__ void add_kernel(Rows dst, ConstRows src, float alpha) {
  FOR_EACH_ELEMENT(dst.rows, dst.cols) dst.p[r * dst.stride + c] += alpha * src.p[r * src.stride + c];
}

__global__ void scale_kernel(Rows t, float alpha) {
  FOR_EACH_ELEMENT(t.rows, t.cols) t.p[r * t.stride + c] *= alpha;
}

__global__ void fill_kernel(Rows t, float value) {
  FOR_EACH_ELEMENT(t.rows, t.cols) t.p[r * t.stride + c] = value;
}

__global__ void add_bias_kernel(Rows y, const float* bias) {
  FOR_EACH_ELEMENT(y.rows, y.cols) y.p[r * y.stride + c] += bias[c];
}

// Index type I: 32 bits when the shape allows (far fewer instructions per
// division than 64).
template <typename E, typename I>
__global__ void copy_kernel(StridedCopy c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < c.numel; i += int64_t{gridDim.x} * blockDim.x) {
    I rest = static_cast<I>(i);
    int64_t d_off = 0, s_off = 0;
    for (int d = c.ndim - 1; d >= 0; --d) {
      const I dim = static_cast<I>(c.shape[d]);
      const I k = rest % dim;
      rest /= dim;
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

// Piece i (at dst + i rows cols) = what pieces 0..i-1 left of x, rounded to
// nearest even: x = sum of the pieces to 8 (bf16) or 11 (f16) bits each.
__global__ void to_bf16_kernel(ConstRows x, __nv_bfloat16* dst, int pieces) {
  FOR_EACH_ELEMENT(x.rows, x.cols) {
    float rest = x.p[r * x.stride + c];
    for (int i = 0; i < pieces; ++i) {
      const __nv_bfloat16 v = __float2bfloat16_rn(rest);
      dst[(i * x.rows + r) * x.cols + c] = v;
      rest -= __bfloat162float(v);
    }
  }
}

__global__ void to_f16_kernel(ConstRows x, __half* dst, int pieces) {
  FOR_EACH_ELEMENT(x.rows, x.cols) {
    float rest = x.p[r * x.stride + c];
    for (int i = 0; i < pieces; ++i) {
      const __half v = __float2half_rn(rest);
      dst[(i * x.rows + r) * x.cols + c] = v;
      rest -= __half2float(v);
    }
  }
}

// The same four columns a thread: 16-byte loads, 8-byte stores (rows of a
// multiple of 4 columns, aligned). One float a thread kept too few loads in
// flight for the HBM rate: the roundings took 0.15 ms a layer of a Mamba-2
// prefill at 8 x 2048 (H100) for about 75 us of traffic.
template <bool kBf16>
__device__ inline unsigned short round_piece(float& rest) {
  if constexpr (kBf16) {
    const __nv_bfloat16 v = __float2bfloat16_rn(rest);
    rest -= __bfloat162float(v);
    return __bfloat16_as_ushort(v);
  } else {
    const __half v = __float2half_rn(rest);
    rest -= __half2float(v);
    return __half_as_ushort(v);
  }
}

template <bool kBf16>
__global__ void to_16bit_x4_kernel(ConstRows x, unsigned short* dst, int pieces) {
  FOR_EACH_ELEMENT(x.rows, x.cols / 4) {
    const float4 v = *reinterpret_cast<const float4*>(x.p + r * x.stride + 4 * c);
    float rest[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < pieces; ++i) {
      ushort4 o;
      o.x = round_piece<kBf16>(rest[0]);
      o.y = round_piece<kBf16>(rest[1]);
      o.z = round_piece<kBf16>(rest[2]);
      o.w = round_piece<kBf16>(rest[3]);
      *reinterpret_cast<ushort4*>(dst + (i * x.rows + r) * x.cols + 4 * c) = o;
    }
  }
}

}  // namespace

void launch_add(Rows dst, ConstRows src, float alpha, cudaStream_t s) {
  add_kernel<<<grid_for(dst.rows, dst.cols), kThreads, 0, s>>>(dst, src, alpha);
}
void launch_scale(Rows t, float alpha, cudaStream_t s) {
  scale_kernel<<<grid_for(t.rows, t.cols), kThreads, 0, s>>>(t, alpha);
}
void launch_fill(Rows t, float value, cudaStream_t s) {
  fill_kernel<<<grid_for(t.rows, t.cols), kThreads, 0, s>>>(t, value);
}
void launch_add_bias(Rows y, const float* bias, cudaStream_t s) {
  add_bias_kernel<<<grid_for(y.rows, y.cols), kThreads, 0, s>>>(y, bias);
}
void launch_copy(const StridedCopy& c, cudaStream_t s) {
  const int b = blocks_for(c.numel);
  if (c.numel < (int64_t{1} << 31)) {
    switch (c.elem_size) {
      case 1: copy_kernel<uint8_t, uint32_t><<<b, kThreads, 0, s>>>(c); break;
      case 2: copy_kernel<uint16_t, uint32_t><<<b, kThreads, 0, s>>>(c); break;
      case 4: copy_kernel<uint32_t, uint32_t><<<b, kThreads, 0, s>>>(c); break;
      default: copy_kernel<uint64_t, uint32_t><<<b, kThreads, 0, s>>>(c); break;
    }
    return;
  }
  switch (c.elem_size) {
    case 1: copy_kernel<uint8_t, int64_t><<<b, kThreads, 0, s>>>(c); break;
    case 2: copy_kernel<uint16_t, int64_t><<<b, kThreads, 0, s>>>(c); break;
    case 4: copy_kernel<uint32_t, int64_t><<<b, kThreads, 0, s>>>(c); break;
    default: copy_kernel<uint64_t, int64_t><<<b, kThreads, 0, s>>>(c); break;
  }
}
void launch_sum_squares(ConstRows t, double* out, cudaStream_t s) {
  sum_squares_kernel<<<1, kThreads, 0, s>>>(t, out);
}
void launch_to_16bit(ConstRows x, void* dst, bool bf16, int pieces, cudaStream_t s) {
  if (x.cols % 4 == 0 && x.stride % 4 == 0 && reinterpret_cast<uintptr_t>(x.p) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(dst) % 8 == 0) {
    const dim3 b = grid_for(x.rows, x.cols / 4);
    auto* d = static_cast<unsigned short*>(dst);
    if (bf16) to_16bit_x4_kernel<true><<<b, kThreads, 0, s>>>(x, d, pieces);
    else to_16bit_x4_kernel<false><<<b, kThreads, 0, s>>>(x, d, pieces);
    return;
  }
  const dim3 b = grid_for(x.rows, x.cols);
  if (bf16) to_bf16_kernel<<<b, kThreads, 0, s>>>(x, static_cast<__nv_bfloat16*>(dst), pieces);
  else to_f16_kernel<<<b, kThreads, 0, s>>>(x, static_cast<__half*>(dst), pieces);
}

}  // namespace ssm::cuda

// launch_linear.h's kernel: a warp per output column n, its lanes over K in
// 16-byte pieces of W's row (8 bf16/f16 values or 4 floats, when the rows
// allow it; else one value at a time), each lane keeping the partial sums of
// all M rows; the lanes' sums are combined by shuffles in a fixed order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ops/cuda/launch_linear.h"

namespace ssm::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int M_MAX = static_cast<int>(kSkinnyRows);

template <WeightType T>
__device__ float widen(const void* w, int64_t i) {
  if constexpr (T == WeightType::kF32)
    return static_cast<const float*>(w)[i];
  else if constexpr (T == WeightType::kBF16)
    return __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]);
  else
    return __half2float(static_cast<const __half*>(w)[i]);
}

// Values per 16-byte piece.
template <WeightType T>
constexpr int kVec = T == WeightType::kF32 ? 4 : 8;

template <WeightType T>
__device__ void widen_piece(const void* row, int64_t k, float (&w)[kVec<T>]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const char*>(row) +
                                                    k * (T == WeightType::kF32 ? 4 : 2));
  if constexpr (T == WeightType::kF32) {
    w[0] = __uint_as_float(raw.x), w[1] = __uint_as_float(raw.y), w[2] = __uint_as_float(raw.z),
    w[3] = __uint_as_float(raw.w);
  } else {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const unsigned short lo = static_cast<unsigned short>(words[i] & 0xffffu),
                           hi = static_cast<unsigned short>(words[i] >> 16);
      if constexpr (T == WeightType::kBF16) {
        w[2 * i] = __uint_as_float(uint32_t{lo} << 16);
        w[2 * i + 1] = __uint_as_float(uint32_t{hi} << 16);
      } else {
        w[2 * i] = __half2float(__ushort_as_half(lo));
        w[2 * i + 1] = __half2float(__ushort_as_half(hi));
      }
    }
  }
}

template <WeightType T, bool VEC>
__global__ void __launch_bounds__(kWarps * 32) skinny_kernel(SkinnyLinear a) {
  const int64_t n = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  if (n >= a.y.cols) return;  // the whole warp
  const int lane = threadIdx.x % 32, M = static_cast<int>(a.x.rows);
  const int64_t K = a.x.cols;
  const size_t elem = T == WeightType::kF32 ? 4 : 2;
  const void* row = static_cast<const char*>(a.W) + n * a.w_stride * elem;
  float acc[M_MAX];
#pragma unroll
  for (int m = 0; m < M_MAX; ++m) acc[m] = 0.f;
  // The k loops unrolled by 4: a decode step's row is 3 (K = 768, bf16) to
  // 12 pieces a lane, and each round trip to memory waited on the one
  // before; unrolled, four pieces' loads are in flight at once (the sums
  // keep their order, so results are unchanged).
  if constexpr (VEC) {
    constexpr int V = kVec<T>;
#pragma unroll 4
    for (int64_t k = int64_t{lane} * V; k < K; k += 32 * V) {
      float w[V];
      widen_piece<T>(row, k, w);
#pragma unroll
      for (int m = 0; m < M_MAX; ++m)
        if (m < M) {
          const float* x = a.x.p + m * a.x.stride + k;
#pragma unroll
          for (int i = 0; i < V; i += 4) {
            const float4 xv = *reinterpret_cast<const float4*>(x + i);
            acc[m] += w[i] * xv.x + w[i + 1] * xv.y + w[i + 2] * xv.z + w[i + 3] * xv.w;
          }
        }
    }
  } else {
#pragma unroll 4
    for (int64_t k = lane; k < K; k += 32) {
      const float w = widen<T>(row, k);
#pragma unroll
      for (int m = 0; m < M_MAX; ++m)
        if (m < M) acc[m] += w * a.x.p[m * a.x.stride + k];
    }
  }
#pragma unroll
  for (int m = 0; m < M_MAX; ++m)
    if (m < M) {
      float v = acc[m];
      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) {
        if (a.bias) v += a.bias[n];
        float* y = a.y.p + m * a.y.stride + n;
        *y = a.accumulate ? *y + v : v;
      }
    }
}

template <WeightType T>
void launch_typed(const SkinnyLinear& a, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>((a.y.cols + kWarps - 1) / kWarps);
  const int64_t V = kVec<T>, elem = T == WeightType::kF32 ? 4 : 2;
  // 16-byte pieces need K, both row strides and both base addresses aligned.
  const bool vec = a.x.cols % V == 0 && (a.w_stride * elem) % 16 == 0 && a.x.stride % 4 == 0 &&
                   reinterpret_cast<uintptr_t>(a.W) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.x.p) % 16 == 0;
  if (vec)
    skinny_kernel<T, true><<<grid, kWarps * 32, 0, s>>>(a);
  else
    skinny_kernel<T, false><<<grid, kWarps * 32, 0, s>>>(a);
}

}  // namespace

void launch_skinny_linear(const SkinnyLinear& a, cudaStream_t s) {
  if (a.y.rows * a.y.cols == 0) return;
  switch (a.type) {
    case WeightType::kF32:
      launch_typed<WeightType::kF32>(a, s);
      break;
    case WeightType::kBF16:
      launch_typed<WeightType::kBF16>(a, s);
      break;
    case WeightType::kF16:
      launch_typed<WeightType::kF16>(a, s);
      break;
  }
}

}  // namespace ssm::cuda

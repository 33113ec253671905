// launch_linear.h's kernel: a warp per output column n, its lanes over K in
// 16-byte pieces of W's row (8 bf16/f16 values or 4 floats, when the rows
// allow it; else one value at a time), each lane keeping the partial sums of
// all M rows; the lanes' sums are combined by shuffles in a fixed order.
// norm_linear's variant first normalises x's rows into shared memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ops/cuda/launch_linear.h"
#include "ops/cuda/overlap_launch.h"
#include "ops/cuda/streamed_load.h"

namespace ssm::cuda {
namespace {

// Four warps a block: a decode step's out projection (768 columns) is 192
// blocks, more than the 132 multiprocessors of an H100 (at eight, 96 left a
// third of them idle).
constexpr int kWarps = 4;
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

// The 16-byte piece of W's row at element k: read-only for the whole
// launch, and read once, so through the non-coherent path without a place
// in L1 (the activations keep it).
template <WeightType T>
__device__ uint4 load_piece(const void* row, int64_t k) {
  return load_streamed16(static_cast<const char*>(row) + k * (T == WeightType::kF32 ? 4 : 2));
}

template <WeightType T>
__device__ void widen_piece(const uint4 raw, float (&w)[kVec<T>]) {
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

__device__ float silu(float z) { return z / (1.f + expf(-z)); }

// norm_linear's rows, kNormPer values a thread at most (2,048 at four
// warps: a 130m decode step's 768 and 1536), so that every load of x, the
// gate and the norm's weight is issued before the first is used: one round
// trip for all (a loop of rounds took one round trip per round, and the
// weights' loads another after the barrier).
constexpr int kNormPer = 16;

// Shared memory of the norm: the M normalised rows of K, then the factor
// 1/rms of each (row, norm group), then a partial sum of squares a warp.
size_t norm_smem_floats(const SkinnyLinear& a) {
  return static_cast<size_t>(a.x.rows * a.x.cols + a.x.rows * (a.x.cols / a.norm_group) + kWarps);
}

// norm_linear's prologue, by the whole block: x's rows, gated, normalised
// into xs (M rows of K). The same in every block of the launch. One row of
// one norm group (the decode step's RMSNorm, and its gated norm at one
// group) sums its squares across the block: each thread its values in
// order, each warp by shuffles, then the warps' sums in order; more rows or
// groups take a warp per (row, group) over xs.
template <int PER>
__device__ void normalise_rows(const SkinnyLinear& a, float* xs) {
  const int M = static_cast<int>(a.x.rows), K = static_cast<int>(a.x.cols), MK = M * K;
  const int group = static_cast<int>(a.norm_group), groups = K / group;
  const int T = static_cast<int>(blockDim.x), tid = static_cast<int>(threadIdx.x);
  const bool gated = a.gate.p != nullptr;
  // Normalised unless the gate comes without a weight (gated_rms_norm's
  // plain gate); RMSNorm always is.
  const bool normalised = !gated || a.norm_weight;
  const bool gate_after = gated && a.norm_weight && a.norm_before_gate;
  float* r = xs + MK;               // M x groups
  float* partial = r + M * groups;  // kWarps
  // Every load first (the weight's too), then the stores: a store to xs
  // between two loads kept them a round trip apart. What the scaling pass
  // needs, f = w (times the gate's SiLU when the gate comes after the norm),
  // is all a thread keeps across the barriers; the row waits in xs
  // (registers held longer cost the launch blocks a multiprocessor).
  float g[PER], z[PER], f[PER];
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = tid + j * T, m = i / K, k = i - m * K;
    g[j] = i < MK ? a.x.p[m * a.x.stride + k] : 0.f;
    z[j] = gated && i < MK ? a.gate.p[m * a.gate.stride + k] : 0.f;
    f[j] = a.norm_weight && i < MK ? a.norm_weight[k] : 1.f;
  }
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    if (gate_after) f[j] *= silu(z[j]);
    else if (gated) g[j] *= silu(z[j]);
    ss += g[j] * g[j];  // zero past the rows
    if (tid + j * T < MK) xs[tid + j * T] = g[j];
  }
  if (!normalised) return;  // the caller's barrier follows
  const int warp = tid / 32, lane = tid % 32;
  if (M == 1 && groups == 1) {
    for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) partial[warp] = ss;
    __syncthreads();
    if (tid == 0) {
      float sum = 0.f;
      for (int v = 0; v < T / 32; ++v) sum += partial[v];
      r[0] = rsqrtf(sum / static_cast<float>(group) + a.eps);
    }
  } else {
    __syncthreads();
    for (int item = warp; item < M * groups; item += T / 32) {
      const float* v = xs + (item / groups) * K + (item % groups) * group;
      float sq = 0.f;
#pragma unroll 4
      for (int k = lane; k < group; k += 32) sq += v[k] * v[k];
      for (int o = 16; o > 0; o /= 2) sq += __shfl_xor_sync(0xffffffffu, sq, o);
      if (lane == 0) r[item] = rsqrtf(sq / static_cast<float>(group) + a.eps);
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = tid + j * T, m = i / K, k = i - m * K;
    if (i < MK) xs[i] = xs[i] * r[m * groups + k / group] * f[j];
  }
}

// The first kAhead 16-byte pieces of each lane's share of W's row are
// loaded before the kernel waits for the one before it (overlap_launch.h)
// and all at once: a decode step's rows are 3 (in_proj, K = 768, bf16) to
// 6 (out_proj, K = 1536) pieces a lane, so its whole weight traffic is in
// flight while the previous kernel finishes (and the tied F32 head's 6,
// K = 768). 8 made the F32 kernel spill.
constexpr int kAhead = 6;

// acc[m] += the piece's 16 bytes of W (widened) times x's row m at k.
template <WeightType T>
__device__ void add_piece(const uint4 raw, const ConstRows& x, int M, int64_t k, float (&acc)[M_MAX]) {
  constexpr int V = kVec<T>;
  float w[V];
  widen_piece<T>(raw, w);
#pragma unroll
  for (int m = 0; m < M_MAX; ++m)
    if (m < M) {
      const float* xm = x.p + m * x.stride + k;
#pragma unroll
      for (int i = 0; i < V; i += 4) {
        const float4 xv = *reinterpret_cast<const float4*>(xm + i);
        acc[m] += w[i] * xv.x + w[i + 1] * xv.y + w[i + 2] * xv.z + w[i + 3] * xv.w;
      }
    }
}

// NORM_PER: norm_linear's values a thread (normalise_rows), 0 for linear.
template <WeightType T, bool VEC, int NORM_PER>
__global__ void __launch_bounds__(kWarps * 32) skinny_kernel(SkinnyLinear a) {
  constexpr bool NORM = NORM_PER > 0;
  let_next_kernel_start();
  const int64_t n = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  const bool column = n < a.y.cols;  // the whole warp
  const int lane = threadIdx.x % 32, M = static_cast<int>(a.x.rows);
  const int64_t K = a.x.cols;
  const size_t elem = T == WeightType::kF32 ? 4 : 2;
  const void* row = static_cast<const char*>(a.W) + (column ? n : 0) * a.w_stride * elem;
  constexpr int V = kVec<T>;
  uint4 ahead[kAhead] = {};
  if constexpr (VEC) {
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int64_t k = (int64_t{lane} + 32 * i) * V;
      if (column && k < K) ahead[i] = load_piece<T>(row, k);
    }
  }
  wait_for_previous_kernel();
  // The rows of x: a's, or (NORM) normalised into shared memory by every
  // block before its warps part.
  extern __shared__ float4 norm_smem[];
  ConstRows x = a.x;
  if constexpr (NORM) {
    float* xs = reinterpret_cast<float*>(norm_smem);
    normalise_rows<NORM_PER>(a, xs);
    __syncthreads();
    x.p = xs;
    x.stride = x.cols;
  }
  if (!column) return;
  float acc[M_MAX];
#pragma unroll
  for (int m = 0; m < M_MAX; ++m) acc[m] = 0.f;
  // Each lane's pieces in order of k (the pieces loaded ahead, then the
  // rest, unrolled by 4 so that four loads are in flight at once): the sums'
  // order does not depend on how far ahead the loads went.
  if constexpr (VEC) {
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int64_t k = (int64_t{lane} + 32 * i) * V;
      if (k < K) add_piece<T>(ahead[i], x, M, k, acc);
    }
#pragma unroll 4
    for (int64_t k = (int64_t{lane} + 32 * kAhead) * V; k < K; k += 32 * V)
      add_piece<T>(load_piece<T>(row, k), x, M, k, acc);
  } else {
#pragma unroll 4
    for (int64_t k = lane; k < K; k += 32) {
      const float w = widen<T>(row, k);
#pragma unroll
      for (int m = 0; m < M_MAX; ++m)
        if (m < M) acc[m] += w * x.p[m * x.stride + k];
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
  // 16-byte pieces need K, both row strides and both base addresses aligned
  // (the normalised rows in shared memory are).
  const bool vec = a.x.cols % V == 0 && (a.w_stride * elem) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.W) % 16 == 0 &&
                   (a.norm || (a.x.stride % 4 == 0 && reinterpret_cast<uintptr_t>(a.x.p) % 16 == 0));
  const size_t smem = a.norm ? norm_smem_floats(a) * sizeof(float) : 0;
  // Half the values a thread where they do: 40 registers fewer, so that a
  // 130m in_proj's 838 blocks take two waves of the multiprocessors, not three.
  const bool half = a.x.rows * a.x.cols <= int64_t{kNormPer / 2} * kWarps * 32;
  void (*kernel)(SkinnyLinear) =
      !a.norm ? (vec ? skinny_kernel<T, true, 0> : skinny_kernel<T, false, 0>)
      : half  ? (vec ? skinny_kernel<T, true, kNormPer / 2> : skinny_kernel<T, false, kNormPer / 2>)
              : (vec ? skinny_kernel<T, true, kNormPer> : skinny_kernel<T, false, kNormPer>);
  launch_overlapped(a.overlap, kernel, dim3(grid), dim3(kWarps * 32), smem, s, a);
}

}  // namespace

bool skinny_norm_fits(const SkinnyLinear& a) {
  return a.norm_group > 0 && a.x.cols % a.norm_group == 0 &&
         a.x.rows * a.x.cols <= int64_t{kNormPer} * kWarps * 32 &&
         norm_smem_floats(a) * sizeof(float) <= size_t{48} << 10;
}

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

// What the few-row projection kernels share (linear_skinny.cu: several
// rows, the multi-wave and one-wave kernels; linear_one_row.cu: one row):
// W's rows read in 16-byte pieces (8 bf16/f16 values or 4 floats) and
// widened exactly, the products summed in F32. Included by .cu files only,
// after <cuda_bf16.h> and <cuda_fp16.h> (which the CPU emulator's transform
// moves ahead of its own definitions, as it can only in a .cu file).
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/cuda/launch_linear.h"
#include "ops/cuda/streamed_load.h"

namespace ssm::cuda::skinny {

// Four warps a block: a decode step's out projection (768 columns) is 192
// blocks, more than the 132 multiprocessors of an H100 (at eight, 96 left a
// third of them idle).
inline constexpr int kWarps = 4;

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// One row whose W rows and x are read in 16-byte pieces.
inline bool one_row_in_pieces(const SkinnyLinear& a) {
  const int64_t V = a.type == WeightType::kF32 ? 4 : 8, elem = a.type == WeightType::kF32 ? 4 : 2;
  return a.x.rows == 1 && a.x.cols % V == 0 && (a.w_stride * elem) % 16 == 0 && aligned16(a.W) &&
         a.x.stride % 4 == 0 && aligned16(a.x.p);
}

// The first kAhead 16-byte pieces of each lane's share of W's row are
// loaded before the kernel waits for the one before it (overlap_launch.h)
// and all at once: a decode step's rows are 3 (in_proj, K = 768, bf16) to
// 6 (out_proj, K = 1536) pieces a lane, so its whole weight traffic is in
// flight while the previous kernel finishes (and the tied F32 head's 6,
// K = 768). 8 made the F32 kernel spill.
inline constexpr int kAhead = 6;

// f(std::integral_constant<WeightType, T>{}) for the weight type T: the
// typed kernel plans of both files, chosen at run time.
template <class F>
auto for_weight_type(WeightType type, F f) {
  switch (type) {
    case WeightType::kF32:
      return f(std::integral_constant<WeightType, WeightType::kF32>{});
    case WeightType::kBF16:
      return f(std::integral_constant<WeightType, WeightType::kBF16>{});
    case WeightType::kF16:
      break;
  }
  return f(std::integral_constant<WeightType, WeightType::kF16>{});
}

// Values per 16-byte piece.
template <WeightType T>
inline constexpr int kVec = T == WeightType::kF32 ? 4 : 8;

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

__device__ __forceinline__ float silu(float z) { return z / (1.f + expf(-z)); }


// acc += the piece's 16 bytes of W (widened) times one row x at k.
template <WeightType T>
__device__ void add_row_piece(const uint4 raw, const float* x, int64_t k, float& acc) {
  constexpr int V = kVec<T>;
  float w[V];
  widen_piece<T>(raw, w);
#pragma unroll
  for (int e = 0; e < V; e += 4) {
    const float4 xv = *reinterpret_cast<const float4*>(x + k + e);
    acc += w[e] * xv.x + w[e + 1] * xv.y + w[e + 2] * xv.z + w[e + 3] * xv.w;
  }
}

// One 16-byte piece of W's row at k, for the norm inside the projection:
// ss += g^2 and acc += W g f over its values (g = x, times SiLU(gate)
// before the norm; f = the norm's weight, times SiLU(gate) after it).
template <WeightType T>
__device__ void add_norm_piece(const SkinnyLinear& a, bool gated, bool gate_after, const uint4 raw, int64_t k,
                               float& acc, float& ss) {
  constexpr int V = kVec<T>;
  float w[V];
  widen_piece<T>(raw, w);
#pragma unroll
  for (int i = 0; i < V; i += 4) {
    const float4 xv = *reinterpret_cast<const float4*>(a.x.p + k + i);
    const float4 fv = a.norm_weight ? *reinterpret_cast<const float4*>(a.norm_weight + k + i)
                                    : make_float4(1.f, 1.f, 1.f, 1.f);
    float g[4] = {xv.x, xv.y, xv.z, xv.w}, f[4] = {fv.x, fv.y, fv.z, fv.w};
    if (gated) {
      const float4 zv = *reinterpret_cast<const float4*>(a.gate.p + k + i);
      const float z[4] = {zv.x, zv.y, zv.z, zv.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (gate_after) f[e] *= silu(z[e]);
        else g[e] *= silu(z[e]);
      }
    }
    ss += g[0] * g[0] + g[1] * g[1] + g[2] * g[2] + g[3] * g[3];
    acc += w[i] * (g[0] * f[0]) + w[i + 1] * (g[1] * f[1]) + w[i + 2] * (g[2] * f[2]) + w[i + 3] * (g[3] * f[3]);
  }
}

// The same piece where the norm has groups narrower than K (Mamba-3's per
// head, 64 channels: rsqrt(mean(g^2) + eps) a group): the `lanes` lanes
// holding one group's pieces (group / V, a power of two up to 32, aligned,
// as the kernels' k = (lane + 32 i) V lay them out) sum its squares by
// shuffles among themselves, and the piece's products join acc already
// scaled by their group's factor. The butterfly gives each lane of a group
// the same sum, so each piece of a group gets the same factor.
template <WeightType T>
__device__ void add_group_norm_piece(const SkinnyLinear& a, bool gated, bool gate_after, const uint4 raw,
                                     int64_t k, int lanes, float& acc) {
  float dot = 0.f, ss = 0.f;
  add_norm_piece<T>(a, gated, gate_after, raw, k, dot, ss);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const unsigned mask = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u) << (lane & ~(lanes - 1));
  for (int o = 1; o < lanes; o *= 2) ss += __shfl_xor_sync(mask, ss, o);
  acc += dot * rsqrtf(ss / static_cast<float>(a.norm_group) + a.eps);
}

// Blocks of `kernel` (of `threads` threads) that a device holds at once;
// 0 where the occupancy API fails (linear_skinny.cu).
int resident_blocks(const void* kernel, size_t smem, int threads = kWarps * 32);

// Launches a's projection by one of linear_one_row.cu's kernels and returns
// true where one takes it (one row: the split or warp-level norm, the
// streamed columns, the split plain projection); false leaves it to
// linear_skinny.cu's.
bool launch_one_row(const SkinnyLinear& a, cudaStream_t s);

}  // namespace ssm::cuda::skinny

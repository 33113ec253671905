// The memory side of the Mamba-2 decode stack's kernel
// (mamba2_decode_stack.cu): 16-byte pieces of weight rows, loads of what
// other blocks write, asks of L2, cp.async groups and the grid barrier
// between its phases. Included by that .cu file only (the CPU emulator
// puts plain loads and copies in their place where __CUDA_ARCH__ is not
// defined).
#pragma once

#include <cstdint>

#include "ops/cuda/streamed_load.h"

namespace ssm::cuda {

// A 16-byte piece of a weight row at element k: 4 F32 or 8 BF16 values.
// Read once a token, so through the non-coherent path, no place in L1.
template <bool BF16>
constexpr int kVec = BF16 ? 8 : 4;

template <bool BF16>
__device__ __forceinline__ uint4 load_piece(const void* row, int64_t k) {
  return load_streamed16(static_cast<const char*>(row) + k * (BF16 ? 2 : 4));
}

template <bool BF16>
__device__ __forceinline__ void widen_piece(const uint4 raw, float (&w)[kVec<BF16>]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (BF16) {
      w[2 * i] = __uint_as_float(words[i] << 16);
      w[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    } else {
      w[i] = __uint_as_float(words[i]);
    }
  }
}

// Asks L2 for the bytes [p, p + bytes), a line a thread at a time.
__device__ __forceinline__ void prefetch_l2(const void* p, int64_t bytes) {
#if defined(__CUDA_ARCH__)
  const char* c = static_cast<const char*>(p);
  for (int64_t o = int64_t{threadIdx.x} * 128; o < bytes; o += int64_t{blockDim.x} * 128)
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(c + o));
#else
  (void)p, (void)bytes;
#endif
}

// What other blocks write during the launch (h, the projections' outputs,
// y, the partial sums, the convolution states) is read through L2 only
// (ld.global.cg): a line this block's L1 kept from an earlier phase would
// be stale.
__device__ __forceinline__ float load_l2(const float* p) {
#if defined(__CUDA_ARCH__)
  return __ldcg(p);
#else
  return *p;
#endif
}

// cp.async groups: the copies issued since the last commit form one; wait
// until at most N are in flight (then a __syncthreads shows every thread's).
__device__ __forceinline__ void commit_copies() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wait_copies() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// Every block waits here until all have arrived; what any wrote before is
// visible to all after (the fences of cooperative groups' grid sync). The
// counter returns to zero each time, the generation only grows.
__device__ __forceinline__ void grid_barrier(unsigned* bar) {
#ifndef SSM_CUDA_EMULATOR
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* gen = bar + 1;
    const unsigned g = *gen;
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == g) {
      }
    }
    __threadfence();
  }
  __syncthreads();
#else
  // The emulator runs blocks one after another: a launch of several phases
  // has one block there (launch_mamba2_decode), and this is its barrier.
  (void)bar;
  __syncthreads();
#endif
}

}  // namespace ssm::cuda

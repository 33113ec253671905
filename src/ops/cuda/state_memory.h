// The recurrent state's memory at large batch, shared by the decode steps
// of Mamba-2 (ssd_step_kernel, conv_ssd.cu) and Mamba-3 (scan_kernel,
// mamba3_scan.cu): at batch 64 the state is most of a step's bytes (50 MB a
// layer of the 130m models) and each entry is read once and written once a
// step, so it is streamed (ld.global.cs / st.global.cs: evict first, no
// place kept in L1 or L2 that the weights and activations could use). And
// the counter by which a decode step's blocks find the last of a sequence.
// Included by .cu files only; the CPU emulator, without __CUDA_ARCH__,
// reads and writes plainly. A BF16 state (StatePtr::bf16) is widened
// exactly on load and rounded to nearest even on store, so that a kernel's
// arithmetic is the F32 state's: the same bits as widening it into an F32
// copy, running on that and rounding it back (the front end's way,
// ops/state_dtype.h).
#pragma once

#include <cuda_bf16.h>

#include <cstring>

namespace ssm::cuda {

template <bool kStream>
__device__ __forceinline__ float load_state(const float* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (kStream) return __ldcs(p);
#endif
  return *p;
}

template <bool kStream>
__device__ __forceinline__ void store_state(float* p, float v) {
#if defined(__CUDA_ARCH__)
  if constexpr (kStream) {
    __stcs(p, v);
    return;
  }
#endif
  *p = v;
}

// A BF16 state entry widened (exact) and an F32 value stored into one
// (rounded to nearest even); the F32 ones as they are.
__device__ __forceinline__ float state_value(float v) { return v; }
__device__ __forceinline__ float state_value(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void set_state_value(float& dst, float v) { dst = v; }
__device__ __forceinline__ __nv_bfloat16 rounded_state(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ void set_state_value(__nv_bfloat16& dst, float v) { dst = rounded_state(v); }

template <bool kStream>
__device__ __forceinline__ float load_state(const __nv_bfloat16* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (kStream) return state_value(__ldcs(p));
#endif
  return state_value(*p);
}

template <bool kStream>
__device__ __forceinline__ void store_state(__nv_bfloat16* p, float v) {
#if defined(__CUDA_ARCH__)
  if constexpr (kStream) {
    __stcs(p, rounded_state(v));
    return;
  }
#endif
  set_state_value(*p, v);
}

// 16 bytes of state at p (16-byte aligned), streamed: the many-sequence
// decode steps' loads and stores (ssd_step_wide.cu, mamba3_scan_step.cu),
// a row's 8 adjacent BF16 entries or 4 F32 ones an instruction.
__device__ __forceinline__ uint4 load_state16(const void* p) {
#if defined(__CUDA_ARCH__)
  return __ldcs(static_cast<const uint4*>(p));
#else
  return *static_cast<const uint4*>(p);
#endif
}
__device__ __forceinline__ void store_state16(void* p, uint4 v) {
#if defined(__CUDA_ARCH__)
  __stcs(static_cast<uint4*>(p), v);
#else
  *static_cast<uint4*>(p) = v;
#endif
}

// 8 adjacent entries of a state row as the many-sequence steps load them
// (ssd_step_wide.cu, mamba3_scan_step.cu): one uint4 of BF16, two of F32.
template <class T>
struct Piece {
  static constexpr int kWords = static_cast<int>(8 * sizeof(T) / 16);
  uint4 w[kWords];
};

template <class T>
__device__ __forceinline__ Piece<T> load_piece(const T* p) {
  Piece<T> v;
#pragma unroll
  for (int i = 0; i < Piece<T>::kWords; ++i) v.w[i] = load_state16(reinterpret_cast<const uint4*>(p) + i);
  return v;
}

// Widened and rounded as load_state and store_state do, so that the
// entries' values are those of the kernels that load them one at a time.
template <class T>
__device__ __forceinline__ void unpack(const Piece<T>& v, float (&h)[8]) {
  T e[8];
  memcpy(e, v.w, sizeof e);
#pragma unroll
  for (int k = 0; k < 8; ++k) h[k] = state_value(e[k]);
}

template <class T>
__device__ __forceinline__ void store_piece(T* p, const float (&h)[8]) {
  T e[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) set_state_value(e[k], h[k]);
  uint4 w[Piece<T>::kWords];
  memcpy(w, e, sizeof e);
#pragma unroll
  for (int i = 0; i < Piece<T>::kWords; ++i) store_state16(reinterpret_cast<uint4*>(p) + i, w[i]);
}

// counter += 1, returning the old count, as one acquire-release atomic at
// GPU scope: what the calling block did before it (ordered by a
// __syncthreads) happens before what the block that sees the last count
// does after it (again behind a __syncthreads). One instruction where a
// __threadfence on either side of a relaxed atomicAdd paid two
// sequentially consistent fences (fence.sc.gpu) a block.
__device__ __forceinline__ unsigned arrive_acq_rel(unsigned* counter) {
#if defined(__CUDA_ARCH__)
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
  return old;
#else
  return atomicAdd(counter, 1u);
#endif
}

}  // namespace ssm::cuda

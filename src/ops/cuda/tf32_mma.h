// The tensor-core and copy primitives of the chunked scan (chunk_scan.cu):
// TF32 conversion (one piece, or the 3xTF32 split x = hi + lo), the warp's
// m16n8k8 TF32 product with F32 accumulation, and 16-byte asynchronous
// copies to shared memory. The CPU emulator (scripts/cuda-emulate) puts its
// own versions of these in their place.
#pragma once
#include <cstdint>

namespace ssm::cuda {

__device__ inline uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

__device__ inline void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = to_tf32(x);
  lo = to_tf32(x - __uint_as_float(hi));
}

// c += a b: a the 16 x 8 row-major fragment, b0 b1 the 8 x 8 column-major
// one (PTX's m16n8k8 layouts).
__device__ inline void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline void copy16_async(float* dst_smem, const float* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst_smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src));
}

// Waits for every copy16_async of this thread (the caller's barrier then
// makes all threads' copies visible).
__device__ inline void wait_async() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
}

// For pipelines: this thread's copy16_async since the last commit as one
// group, and a wait until at most kPending of its groups are in flight.
__device__ inline void commit_async() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ inline void wait_async_pending() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

}  // namespace ssm::cuda

// A 16-byte load of weights read once per launch: through the non-coherent
// path and without a place in L1, which the activations keep. Shared by the
// few-row projections (linear_skinny.cu) and the decode stack
// (decode_stack_memory.h); the CPU emulator, without __CUDA_ARCH__, reads it
// plainly.
#pragma once

#include <cstdint>

namespace ssm::cuda {

__device__ __forceinline__ uint4 load_streamed16(const char* p) {
#if defined(__CUDA_ARCH__)
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
#else
  return *reinterpret_cast<const uint4*>(p);
#endif
}

}  // namespace ssm::cuda

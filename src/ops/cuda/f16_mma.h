// The tensor-core primitives of FP16 operands (ssd_scan_backward_f16.cu):
// two F32 values to a pair of FP16 (to nearest even), ldmatrix of four
// 8 x 8 matrices of 16-bit values (as stored or transposed) and the warp's
// m16n8k16 FP16 product with F32 accumulation. The CPU emulator
// (scripts/cuda-emulate/emu_f16_mma.h) puts its own versions of these in
// their place.
#pragma once
#include <cstdint>

namespace ssm::cuda {

// lo in the low 16 bits (the lower column of a fragment's pair), hi above.
__device__ inline uint32_t pack_f16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Four 8 x 8 matrices of 16-bit values: lanes 8 i .. 8 i + 7 give the
// shared-memory addresses of matrix i's rows (16 bytes each); lane l gets
// in r[i] matrix i's (row l / 4, columns 2 (l % 4), +1), or with _trans
// its (rows 2 (l % 4), +1, column l / 4).
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* row) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// c += a b: a the 16 x 16 row-major fragment, b0 b1 the 16 x 8
// column-major one (PTX's m16n8k16 layouts for .f16), F32 accumulators.
__device__ inline void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace ssm::cuda

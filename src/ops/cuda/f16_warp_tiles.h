// A warp's share of a product of FP16 shared-memory matrices on the tensor
// cores (f16_mma.h): a 16 x 32 tile of the result (four m16n8k16 tiles) in
// F32 accumulators laid out as tf32_warp_tiles.h's (tiles::for_each_acc
// walks them), fragments loaded with ldmatrix, and the staging of F32 rows
// as FP16 with a power-of-two scale. Used by ssd_scan_backward_f16.cu.
//
// FP16 keeps TF32's 10 mantissa bits but only 5 exponent bits: each staged
// operand is multiplied by 2^s that brings its largest magnitude into
// [2^14, 2^15), so its values round as TF32 would down to 2^-28 of that
// largest (FP16's smallest normal, 2^-14), and the products' accumulators
// are multiplied by 2^-(s_A + s_B), which is exact.
//
// Layout: rows of `ld` halves, ld a multiple of 64, and the 16-byte pieces
// of row r swizzled (piece c at c ^ (r % 8)), so that the 8 rows that one
// ldmatrix matrix reads fall in 8 different bank groups without padding.
// Include f16_mma.h and tf32_warp_tiles.h before this header (the CPU
// emulator replaces the former in the .cu file with its own primitives).
#pragma once
#include <cstdint>

namespace ssm::cuda::f16tiles {

using tiles::Acc;
using tiles::kTileCols;

__host__ __device__ constexpr int half_pitch(int64_t cols) {
  return static_cast<int>(tiles::round_up(cols, 64));
}

// The offset of element (r, c) of a swizzled matrix with rows of ld halves.
__device__ __forceinline__ int at(int r, int c, int ld) {
  return r * ld + ((((c >> 3) ^ (r & 7)) << 3) | (c & 7));
}

struct Half16 {
  const uint16_t* p;
  int ld;
};

// 2^e as a float, for |e| <= 126.
__device__ __forceinline__ float pow2(int e) { return __uint_as_float(uint32_t(127 + e) << 23); }

// The scale exponent s of an operand whose largest magnitude is m:
// m 2^s in [2^14, 2^15); 0 for zeros, infinities or NaN; within [-60, 60]
// so that two scales' product and its inverse are floats.
__device__ __forceinline__ int scale_exp(float m) {
  const int e = static_cast<int>((__float_as_uint(m) >> 23) & 0xff);
  if (e == 0 || e == 255) return 0;
  const int s = 14 - (e - 127);
  return s < -60 ? -60 : s > 60 ? 60 : s;
}

// acc[j] (rows m0..m0+16, columns n0 + 8 j ..) += A[m0.., k0..k1) B[k0..k1, n0 + 8 j..),
// for the pairs of tiles j = 2 jj, 2 jj + 1 with n0 + 16 jj < ncols (ncols
// a multiple of 16). k0, k1 multiples of 16; the sum runs over k in
// increasing order. Storage: kATrans false has A(r, k) at row r, column k,
// true at row k, column r; kBTrans false has B(k, n) at row n, column k,
// true at row k, column n.
template <bool kATrans, bool kBTrans>
__device__ void warp_mma_f16(Acc& acc, Half16 A, Half16 B, int k0, int k1, int m0, int n0,
                             int ncols) {
  const int lane = threadIdx.x % 32, i = lane / 8, r = lane % 8;
  // This lane's row address of matrix i: the A fragment's a[i] covers rows
  // m0 + 8 (i % 2), columns k + 8 (i / 2); a pair of B tiles' b0, b1 of
  // the first then of the second tile cover columns nb + 8 (i / 2), rows
  // k + 8 (i % 2).
  for (int k = k0; k < k1; k += 16) {
    uint32_t a[4];
    if constexpr (kATrans)
      ldmatrix_x4_trans(a, A.p + at(k + 8 * (i / 2) + r, m0 + 8 * (i % 2), A.ld));
    else
      ldmatrix_x4(a, A.p + at(m0 + 8 * (i % 2) + r, k + 8 * (i / 2), A.ld));
#pragma unroll
    for (int jj = 0; jj < kTileCols / 16; ++jj) {
      const int nb = n0 + 16 * jj;
      if (nb < ncols) {
        uint32_t b[4];
        if constexpr (kBTrans)
          ldmatrix_x4_trans(b, B.p + at(k + 8 * (i % 2) + r, nb + 8 * (i / 2), B.ld));
        else
          ldmatrix_x4(b, B.p + at(nb + 8 * (i / 2) + r, k + 8 * (i % 2), B.ld));
        mma_f16(acc[2 * jj], a, b[0], b[1]);
        mma_f16(acc[2 * jj + 1], a, b[2], b[3]);
      }
    }
  }
}

// An operand's F32 rows held in this thread's registers from their load
// to their staging as FP16 (the scale needs the block's largest magnitude
// first): runs of 4 columns, run i = threadIdx.x + q blockDim.x (q < kRuns)
// of rows [0, total) x [0, ld) at row i / (ld / 4), column 4 (i % (ld / 4));
// the caller sees that total ld / 4 <= kRuns blockDim.x.
template <int kRuns>
struct HeldRows {
  float4 v[kRuns];
  // Rows x cols of src (row stride `stride`; zeros past them), with `vec`
  // 16-byte loads (src, stride and cols multiples of 4 floats); returns this
  // thread's largest magnitude.
  __device__ float load(const float* src, int64_t stride, int rows, int cols, int ld, bool vec) {
    const int per = ld / 4;
    float m = 0.f;
#pragma unroll
    for (int q = 0; q < kRuns; ++q) {
      const int i = threadIdx.x + q * blockDim.x, r = i / per, c = 4 * (i % per);
      float4 x{0.f, 0.f, 0.f, 0.f};
      if (r < rows && c < cols) {
        const float* s = src + r * stride + c;
        if (vec) {
          x = *reinterpret_cast<const float4*>(s);
        } else {
          x.x = s[0];
          if (c + 1 < cols) x.y = s[1];
          if (c + 2 < cols) x.z = s[2];
          if (c + 3 < cols) x.w = s[3];
        }
      }
      v[q] = x;
      m = fmaxf(m, fmaxf(fmaxf(fabsf(x.x), fabsf(x.y)), fmaxf(fabsf(x.z), fabsf(x.w))));
    }
    return m;
  }
  // Rows [0, total) x [0, ld) of dst: the values times `scale` as FP16.
  __device__ void stage(uint16_t* dst, int total, int ld, float scale) const {
    const int per = ld / 4;
#pragma unroll
    for (int q = 0; q < kRuns; ++q) {
      const int i = threadIdx.x + q * blockDim.x, r = i / per, c = 4 * (i % per);
      if (r < total)
        *reinterpret_cast<uint2*>(dst + at(r, c, ld)) = uint2{
            pack_f16x2(v[q].x * scale, v[q].y * scale), pack_f16x2(v[q].z * scale, v[q].w * scale)};
    }
  }
};

// The block's largest of each warp's m: the warp's, by shuffles, to
// slots[warp] (the caller's barrier, then block_max reads them).
__device__ __forceinline__ void warp_max_to(float m, float* slots) {
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = m;
}
__device__ __forceinline__ float block_max(const float* slots) {
  float m = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) m = fmaxf(m, slots[w]);
  return m;
}

// Elements (r, c) and (r, c + 1) of dst (c even) as FP16.
__device__ __forceinline__ void store_pair(uint16_t* dst, int ld, int r, int c, float lo,
                                           float hi) {
  *reinterpret_cast<uint32_t*>(dst + at(r, c, ld)) = pack_f16x2(lo, hi);
}

}  // namespace ssm::cuda::f16tiles

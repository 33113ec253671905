// A warp's share of a product of shared-memory matrices on the tensor
// cores (tf32_mma.h): a 16 x 32 tile of the result (four m16n8k8 tiles) in
// F32 accumulators, from operands read through strides (so one matrix
// serves as A or as its transpose). kSplit: the 3xTF32 split, F32-exact to
// about 1e-6 relative; else one TF32 product (contexts that round their
// products); there kRoundedA / kRoundedB mark an operand that already holds
// TF32 values (round_tf32 when it was staged), whose bits are the fragments:
// no conversion per fragment element, the same bits as converting there. Used by the scans'
// forward (chunk_scan.cu) and backward kernels.
//
// Bank conflicts of the fragment loads: an operand read as A(r, c) at
// r * ld + c (or B(k, n) at n * ld + k) wants ld = 4 mod 32, one read as
// A(r, c) at c * ld + r (or B(k, n) at k * ld + n) wants ld = 8 mod 32; a
// matrix read both ways has 2-way conflicts in one of them.
// Include tf32_mma.h before this header (the CPU emulator replaces that
// include in the .cu file with its own primitives).
#pragma once
#include <cstdint>

namespace ssm::cuda::tiles {

constexpr int kTileCols = 32;  // a warp's work item: 16 rows x 32 columns
using Acc = float[kTileCols / 8][4];

__host__ __device__ constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
// A row pitch of `cols` floats with `rem` mod 32 (4 or 8: see above).
__host__ __device__ constexpr int pitch(int64_t cols, int rem) {
  return static_cast<int>(round_up(cols, 32) + rem);
}

// A shared-memory matrix: element (r, c) at p[r * rs + c * cs].
struct Smem {
  const float* p;
  int rs, cs;
  __device__ float operator()(int r, int c) const { return p[r * rs + c * cs]; }
};

template <class T>  // Acc (a template: defined in a header without inline)
__device__ void zero(T& acc) {
#pragma unroll
  for (int j = 0; j < kTileCols / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
}

// x rounded to TF32, as a float (an operand staged for kRoundedA or B).
__device__ __forceinline__ float round_tf32(float x) { return __uint_as_float(to_tf32(x)); }

template <bool kRounded>  // a template: defined in a header without inline
__device__ uint32_t tf32_bits(float x) {
  if constexpr (kRounded)
    return __float_as_uint(x);
  else
    return to_tf32(x);
}

// acc[j] (rows m0..m0+16, columns n0 + 8 j ..) += A[m0.., k0..k1) B[k0..k1, n0 + 8 j..),
// for the tiles j with n0 + 8 j < ncols. k0, k1 multiples of 8; the sum
// runs over k in increasing order.
template <bool kSplit, bool kRoundedA = false, bool kRoundedB = false>
__device__ void warp_mma(Acc& acc, Smem A, Smem Bm, int k0, int k1, int m0, int n0, int ncols) {
  const int lane = threadIdx.x % 32, g = lane / 4, tg = lane % 4;
  for (int k = k0; k < k1; k += 8) {
    uint32_t ah[4], al[4];
    if constexpr (kSplit) {
      split_tf32(A(m0 + g, k + tg), ah[0], al[0]);
      split_tf32(A(m0 + g + 8, k + tg), ah[1], al[1]);
      split_tf32(A(m0 + g, k + tg + 4), ah[2], al[2]);
      split_tf32(A(m0 + g + 8, k + tg + 4), ah[3], al[3]);
    } else {
      ah[0] = tf32_bits<kRoundedA>(A(m0 + g, k + tg));
      ah[1] = tf32_bits<kRoundedA>(A(m0 + g + 8, k + tg));
      ah[2] = tf32_bits<kRoundedA>(A(m0 + g, k + tg + 4));
      ah[3] = tf32_bits<kRoundedA>(A(m0 + g + 8, k + tg + 4));
    }
#pragma unroll
    for (int j = 0; j < kTileCols / 8; ++j) {
      const int n = n0 + 8 * j;
      if (n < ncols) {
        if constexpr (kSplit) {
          uint32_t bh0, bl0, bh1, bl1;
          split_tf32(Bm(k + tg, n + g), bh0, bl0);
          split_tf32(Bm(k + tg + 4, n + g), bh1, bl1);
          mma_tf32(acc[j], al, bh0, bh1);
          mma_tf32(acc[j], ah, bl0, bl1);
          mma_tf32(acc[j], ah, bh0, bh1);
        } else {
          mma_tf32(acc[j], ah, tf32_bits<kRoundedB>(Bm(k + tg, n + g)),
                   tf32_bits<kRoundedB>(Bm(k + tg + 4, n + g)));
        }
      }
    }
  }
}

// Calls f(row, col, j, e) for each accumulator element acc[j][e] of a
// warp's item whose tile starts below ncols.
template <class F>
__device__ void for_each_acc(int m0, int n0, int ncols, F f) {
  const int lane = threadIdx.x % 32, g = lane / 4, tg = lane % 4;
#pragma unroll
  for (int j = 0; j < kTileCols / 8; ++j) {
    const int n = n0 + 8 * j + 2 * tg;
    if (n0 + 8 * j < ncols) {
      f(m0 + g, n, j, 0);
      f(m0 + g, n + 1, j, 1);
      f(m0 + g + 8, n, j, 2);
      f(m0 + g + 8, n + 1, j, 3);
    }
  }
}

// Rows [0, total) of a pitch-`ld` shared-memory matrix from `rows` rows of
// src (row stride `stride`), `cols` entries each padded with zeros to
// `padded`; rows past `rows` are zeros. A warp per row (the block's warps
// in turn); with `vec` 16-byte cp.async pieces (src, stride and cols
// multiples of 4 floats; the caller waits with wait_async before its
// barrier).
template <class Float>  // float (a template: defined in a header without inline)
__device__ void load_rows(Float* dst, int ld, const Float* src, int64_t stride, int rows,
                          int total, int cols, int padded, bool vec) {
  const int warps = static_cast<int>(blockDim.x / 32), warp = threadIdx.x / 32,
            lane = threadIdx.x % 32;
  for (int r = warp; r < total; r += warps) {
    Float* d = dst + r * ld;
    const Float* s = r < rows ? src + r * stride : nullptr;
    if (vec) {
      for (int c = 4 * lane; c < padded; c += 128) {
        if (s && c < cols)
          copy16_async(d + c, s + c);
        else
          *reinterpret_cast<float4*>(d + c) = float4{0.f, 0.f, 0.f, 0.f};
      }
    } else {
      for (int c = lane; c < padded; c += 32) d[c] = s && c < cols ? s[c] : 0.f;
    }
  }
}

// Rounds to TF32 the pieces of dst that this thread's load_rows (same
// arguments) wrote: after its wait_async, with no barrier in between.
template <class Float>  // float (a template: defined in a header without inline)
__device__ void round_rows(Float* dst, int ld, int total, int padded, bool vec) {
  const int warps = static_cast<int>(blockDim.x / 32), warp = threadIdx.x / 32,
            lane = threadIdx.x % 32;
  const int c0 = vec ? 4 * lane : lane, step = vec ? 128 : 32, width = vec ? 4 : 1;
  for (int r = warp; r < total; r += warps)
    for (int c = c0; c < padded; c += step)
      for (int i = 0; i < width; ++i) dst[r * ld + c + i] = round_tf32(dst[r * ld + c + i]);
}

}  // namespace ssm::cuda::tiles

// The tiles the flash-attention kernels share (attention.cu's forward,
// attention_backward.cu's dq and dk dv kernels): a block of 4 warps over a
// tile of 64 rows (queries, or keys in the backward's dk dv kernel), each
// warp owning 16 rows across all 64 columns of a score tile, so that a row's
// softmax statistics stay in the 4 lanes that hold it (no shared memory, no
// barrier). Products on the tensor cores through tf32_warp_tiles.h: kSplit,
// the 3xTF32 split (F32-exact to about 1e-6); else one TF32 product (a
// context that rounds its products). Head dims up to 32 kOT, kOT <= 4.
// Include tf32_mma.h and tf32_warp_tiles.h before this header (the CPU
// emulator replaces the first).
#pragma once
#include <cstdint>

namespace ssm::cuda::attn {

using tiles::Acc;
using tiles::Smem;

constexpr int kRows = 64;  // rows and columns of a score tile
constexpr int kThreads = 128;
constexpr int kScoreLd = kRows + 4;  // a score tile's pitch, read as A(r, c) at r ld + c

// The head dim's 32-column groups a tile kernel is instantiated for (0:
// none fits, the plain kernels take it).
inline int column_groups(int64_t hd) { return hd <= 32 ? 1 : hd <= 64 ? 2 : hd <= 128 ? 4 : 0; }

// Row pitches of hd-wide operands: read as A(r, c) or as B(k, n) at
// n ld + k (ld = 4 mod 32); one read only as B(k, n) at k ld + n (8 mod 32).
struct Pitches {
  int hdp, ld, ld8;  // hd padded to the mma's k step of 8
  __host__ __device__ static Pitches of(int64_t hd) {
    return {static_cast<int>(tiles::round_up(hd, 8)), tiles::pitch(hd, 4), tiles::pitch(hd, 8)};
  }
};

// s[c] = X Y^T for the warp's 16 rows of X and the 64 rows of Y as columns,
// c-th half: keys 32c..32c+31 (hdp: X's and Y's columns, zero-padded).
template <bool kSplit>
__device__ void dot_tile(Acc (&s)[2], const float* X, const float* Y, int ld, int hdp) {
  const int m0 = 16 * static_cast<int>(threadIdx.x / 32);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    tiles::zero(s[c]);
    tiles::warp_mma<kSplit>(s[c], Smem{X, ld, 1}, Smem{Y, 1, ld}, 0, hdp, m0, 32 * c, kRows);
  }
}

// acc[c] += M Z for the warp's 16 rows of the score tile M (pitch
// kScoreLd) and Z's 64 rows of hd columns (pitch ldz), columns 32c...
template <bool kSplit, int kOT>
__device__ void times_rows(Acc (&acc)[kOT], const float* M, const float* Z, int ldz, int hd) {
  const int m0 = 16 * static_cast<int>(threadIdx.x / 32);
#pragma unroll
  for (int c = 0; c < kOT; ++c)
    tiles::warp_mma<kSplit>(acc[c], Smem{M, kScoreLd, 1}, Smem{Z, ldz, 1}, 0, kRows, m0, 32 * c,
                            hd);
}

// Calls f(x, row, col) for each element x of the warp's score tile s
// (row, col in the 64 x 64 tile); f may rewrite x.
template <class F>
__device__ void for_each_score(Acc (&s)[2], F f) {
  const int lane = threadIdx.x % 32, g = lane / 4, tg = lane % 4;
  const int m0 = 16 * static_cast<int>(threadIdx.x / 32);
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        f(s[c][j][e], m0 + g + (e >= 2 ? 8 : 0), 32 * c + 8 * j + 2 * tg + (e & 1));
}

// The same over an hd-wide accumulator of kOT groups (columns below hd).
template <int kOT, class F>
__device__ void for_each_out(Acc (&acc)[kOT], int hd, F f) {
  const int lane = threadIdx.x % 32, g = lane / 4, tg = lane % 4;
  const int m0 = 16 * static_cast<int>(threadIdx.x / 32);
#pragma unroll
  for (int c = 0; c < kOT; ++c)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 32 * c + 8 * j + 2 * tg + (e & 1);
        if (col < hd) f(acc[c][j][e], m0 + g + (e >= 2 ? 8 : 0), col);
      }
}

// A thread's row statistic (its rows g and g + 8: index e / 2) combined
// over the 4 lanes that share the row.
template <bool kMax>
__device__ void quad_reduce(float (&v)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int o = 1; o < 4; o *= 2) {
      const float w = __shfl_xor_sync(0xffffffffu, v[i], o);
      v[i] = kMax ? fmaxf(v[i], w) : v[i] + w;
    }
}

// The score tile's element written into the warp's rows of P (pitch kScoreLd).
__device__ __forceinline__ float& at(float* P, int row, int col) { return P[row * kScoreLd + col]; }

}  // namespace ssm::cuda::attn

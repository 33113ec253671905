// What the SSD backward's chunk kernels share (ssd_scan_backward_tiles.cu,
// ssd_scan_backward_f16.cu): chunks of 64 steps, the sizes padded to the
// tensor-core tiles, a block's chunk, the chunk's decay, and the fixed-order
// row sums of a warp item.
#pragma once
#include <cstdint>

#include "ops/cuda/launch_train.h"

namespace ssm::cuda::ssd_chunk {

constexpr int kRows = 64;  // steps per chunk

struct Geometry {
  int P, N, Pp, Np;  // sizes, and padded to 16
  int64_t chunks;
  bool vec_x, vec_dy, vec_B, vec_C, vec_state, vec_cb;  // rows copied in 16-byte pieces
};

struct Chunk {
  int64_t b, h, g, row0, slot;  // slot: (b H + h) chunks + c, the scratch's order
  int64_t cb;                   // (b G + g) chunks + c: the chunk's C B^T
  int len;
};

// Heads fastest: the heads of a group, which read the same B and C rows,
// run side by side and share them in L2.
__device__ __forceinline__ Chunk chunk_of(const SsdScanBackwardLaunch& a, const Geometry& geo) {
  Chunk k;
  k.h = blockIdx.x % a.H;
  const int64_t c = (blockIdx.x / a.H) % geo.chunks;
  k.b = blockIdx.x / (a.H * geo.chunks);
  k.g = k.h / (a.H / a.G);
  k.row0 = k.b * a.L + c * kRows;
  k.slot = (k.b * a.H + k.h) * geo.chunks + c;
  k.cb = (k.b * a.G + k.g) * geo.chunks + c;
  k.len = static_cast<int>(min(int64_t{kRows}, a.L - c * kRows));
  return k;
}

// The chunk's dt (zeros past its end) and cs_t = sum_{u<=t} dt_u A, the
// first warp scanning with shuffles. Ends with a barrier.
__device__ __forceinline__ void load_decay(const SsdScanBackwardLaunch& a, const Chunk& k,
                                           float* dt, float* cs) {
  if (threadIdx.x < 32) {
    const int l = threadIdx.x;
    const float* src = a.dt.p + k.row0 * a.dt.stride + k.h;
    const float d0 = l < k.len ? src[l * a.dt.stride] : 0.f;
    const float d1 = l + 32 < k.len ? src[(l + 32) * a.dt.stride] : 0.f;
    dt[l] = d0;
    dt[l + 32] = d1;
    const float A = a.A[k.h];
    float x0 = d0 * A, x1 = d1 * A;
    for (int o = 1; o < 32; o *= 2) {
      const float y0 = __shfl_up_sync(0xffffffffu, x0, o), y1 = __shfl_up_sync(0xffffffffu, x1, o);
      if (l >= o) x0 += y0, x1 += y1;
    }
    x1 += __shfl_sync(0xffffffffu, x0, 31);
    cs[l] = x0;
    cs[l + 32] = x1;
  }
  __syncthreads();
}

// Adds over the 4 lanes of each row, in a fixed tree, a warp item's
// per-lane sums of its rows m0 + g and m0 + g + 8 (rows[0], rows[1]), and
// writes them to dst[g] and dst[g + 8].
__device__ __forceinline__ void row_sums(float (&rows)[2], float* dst) {
  const int lane = threadIdx.x % 32;
  for (int o = 1; o < 4; o *= 2) {
    rows[0] += __shfl_xor_sync(0xffffffffu, rows[0], o);
    rows[1] += __shfl_xor_sync(0xffffffffu, rows[1], o);
  }
  if (lane % 4 == 0) {
    dst[lane / 4] = rows[0];
    dst[lane / 4 + 8] = rows[1];
  }
}

// The chunk's step weights: eL[t] = exp(cs_last - cs_t) (a source's
// weight at the chunk's end) and eS[t] = exp(cs_t) (the start state's at
// step t), zeros past its end.
__device__ __forceinline__ void chunk_step_weights(const float* cs, int len, float* eL, float* eS) {
  const float last = cs[len - 1];
  for (int t = threadIdx.x; t < kRows; t += blockDim.x) {
    eL[t] = t < len ? expf(last - cs[t]) : 0.f;
    eS[t] = t < len ? expf(cs[t]) : 0.f;
  }
}

// dD's part, dy . x over the chunk's len x P entries (rows ld floats
// apart): each thread's run, then a fixed tree in each warp, its sum to
// red[warp] (write_step_sums adds the warps in order).
__device__ __forceinline__ void warp_dd_part(const float* dy, int64_t ldy, const float* x, int64_t ldx,
                                             int len, int P, float* red) {
  float dD = 0;
  for (int i = threadIdx.x; i < len * P; i += blockDim.x) {
    const int t = i / P, p = i % P;
    dD += dy[t * ldy + p] * x[t * ldx + p];
  }
  for (int o = 16; o > 0; o /= 2) dD += __shfl_xor_sync(0xffffffffu, dD, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = dD;
}

// The chunk_backward kernels' end, after the barrier that completes the
// partial row sums: per step, ddt (the column items' sums of x . dS B,
// pass 5) and g = <C, dC^h> - <B, dB^h> (pass 4), a difference of nearly
// equal sums, so its partials (F32 over 32 columns, far below the products'
// rounding in dB^h and dC^h) are added in double; then thread 0 adds the
// warps' dD parts into the chunk's decay slot (pass 2 is done with it).
__device__ __forceinline__ void write_step_sums(const SsdScanBackwardLaunch& a, const Chunk& k,
                                                int len, const float* part, int col_items,
                                                const float* gpart, int n_items,
                                                const float* red, int warps) {
  for (int t = threadIdx.x; t < len; t += blockDim.x) {
    float acc = 0;
    for (int ci = 0; ci < col_items; ++ci) acc += part[ci * kRows + t];
    a.ddt.p[(k.row0 + t) * a.ddt.stride + k.h] = acc;
    double gsum = 0;
    for (int i = 0; i < 2 * n_items; ++i) gsum += gpart[i * kRows + t];
    a.g[(k.row0 + t) * a.H + k.h] = static_cast<float>(gsum);
  }
  if (threadIdx.x == 0) {
    float sum = 0;
    for (int w = 0; w < warps; ++w) sum += red[w];
    a.decay[k.slot] = sum;
  }
}

inline bool vec_ok(const ConstRows& v, int64_t cols) {
  return reinterpret_cast<uintptr_t>(v.p) % 16 == 0 && v.stride % 4 == 0 && cols % 4 == 0;
}

inline Geometry geometry_of(const SsdScanBackwardLaunch& a) {
  Geometry g;
  g.P = static_cast<int>(a.P);
  g.N = static_cast<int>(a.N);
  g.Pp = static_cast<int>((a.P + 15) / 16 * 16);
  g.Np = static_cast<int>((a.N + 15) / 16 * 16);
  g.chunks = (a.L + kRows - 1) / kRows;
  g.vec_x = vec_ok(a.x, a.P);
  g.vec_dy = vec_ok(a.dy, a.P);
  g.vec_B = vec_ok(a.Bm, a.N);
  g.vec_C = vec_ok(a.C, a.N);
  g.vec_state = reinterpret_cast<uintptr_t>(a.states) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(a.dstates) % 16 == 0 && a.N % 4 == 0;
  g.vec_cb = reinterpret_cast<uintptr_t>(a.cb) % 16 == 0;
  return g;
}

}  // namespace ssm::cuda::ssd_chunk

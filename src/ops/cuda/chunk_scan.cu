// The chunked scan (launch_chunk_scan.h) on the tensor cores, in three
// launches:
//   1. chunk states, a block per (b, heads of a group, chunk): each head's
//      own state of the chunk, sum_s exp(cum_end - cum_s) w_s v_s k_s^T (a
//      P x 64 by 64 x N product), K loaded once for the block's heads;
//   2. the state pass, a thread per (b, h, p, n), sequential over chunks:
//      the state entering each chunk, S <- exp(cum_end) S + chunk state;
//   3. outputs, a block per (b, heads of a group, chunk): Q K^T once, then
//      per head the masked, decayed scores G = (Q K^T) . weights (64 x 64)
//      and O = G V + diag(exp(cum)) Q S_in^T (+ D v), the two products in
//      two accumulators.
// The products run as mma.sync m16n8k8 in TF32 with the 3xTF32 split
// (x = hi + lo, hi lo' + lo hi' + hi hi' accumulated in F32), so the result
// matches the F32 recurrence to about 1e-6 relative; or, when the context
// rounds its products (ChunkScanLaunch::split false: the reference's bf16
// products, or training with --bf16), as one TF32 product each, a third of
// the matrix instructions, every operand rounded to TF32 once where it sits
// in shared memory (the warp loops then convert nothing; D v takes the
// rounded v too). Operands sit in shared memory, rows padded so that the
// fragment loads of a warp hit 32 banks.
// The warp tiles (and the staged rounding: round_rows) are
// tf32_warp_tiles.h's, as the backward's; the mma and copy primitives
// tf32_mma.h's.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include <cuda_bf16.h>

#include "ops/cuda/launch_chunk_scan.h"
#include "ops/cuda/state_memory.h"
#include "ops/cuda/tf32_mma.h"
#include "ops/cuda/tf32_warp_tiles.h"

namespace ssm::cuda {
namespace {

constexpr int kRows = 64;  // rows (time x rank) per chunk
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
// The warp tiles, their operands and the 3xTF32 split: tf32_warp_tiles.h,
// shared with the scans' backward kernels.
using tiles::Acc;
using tiles::for_each_acc;
using tiles::kTileCols;
using tiles::pitch;
using tiles::round_rows;
using tiles::round_tf32;
using tiles::round_up;
using tiles::Smem;
using tiles::warp_mma;
using tiles::zero;

__device__ float decay_exp(float x) { return x < -80.f ? 0.f : expf(x); }

// acc += A[.., 0..K) B[0..K), ..): kSplit, the 3xTF32 split of F32
// operands; else one TF32 product of operands already rounded where they
// sit (round_rows, round_tf32), so that the warp loops convert nothing.
template <bool kSplit>
__device__ void product(Acc& acc, Smem A, Smem Bm, int K, int m0, int n0, int ncols) {
  warp_mma<kSplit, !kSplit, !kSplit>(acc, A, Bm, 0, K, m0, n0, ncols);
}

struct Geometry {
  int T, R, N, P, Np, Pp;  // steps per chunk, rank, sizes and padded sizes
  int heads, state_heads;  // heads an output and a state block take (heads_per_block)
  int64_t chunks;
  bool vec_q, vec_k, vec_v;  // rows copied in 16-byte pieces
};

__device__ const float* at(const ScanView& v, int64_t b, int64_t h, int64_t t, int64_t r) {
  return v.p + b * v.sb + (h / v.hdiv) * v.sh + t * v.st + r * v.sr;
}

// Whether a view's rows can be copied in 16-byte pieces: the base and
// every stride on 4 floats, and `cols` a multiple of 4.
bool vec_ok(const ScanView& v, int64_t cols) {
  return reinterpret_cast<uintptr_t>(v.p) % 16 == 0 && v.sb % 4 == 0 && v.sh % 4 == 0 &&
         v.st % 4 == 0 && v.sr % 4 == 0 && cols % 4 == 0;
}

// Loads rows [0, kRows) of a chunk (row = (t - t0) R + r) into a pitch-`ld`
// shared-memory matrix, `cols` entries each padded with zeros to `padded`;
// rows past the chunk's end are zeros. A warp per row and its lanes along
// the row: a row's address is worked out once (a flat index over rows and
// pieces cost two integer divisions a piece). With `vec` the copies are
// 16-byte cp.async pieces, many in flight per thread (the caller waits with
// wait_async before its barrier); else single floats.
__device__ void load_rows(float* dst, int ld, const ScanView& v, int64_t b, int64_t h, int64_t t0,
                          int rows, int R, int cols, int padded, bool vec) {
  const float* base = at(v, b, h, t0, 0);  // one 64-bit division per block, not per piece
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int row = warp; row < kRows; row += kWarps) {
    float* d = dst + row * ld;
    const float* src = row < rows ? base + (row / R) * v.st + (row % R) * v.sr : nullptr;
    if (vec) {
      for (int c = 4 * lane; c < padded; c += 128) {
        if (src && c < cols)
          copy16_async(d + c, src + c);
        else
          *reinterpret_cast<float4*>(d + c) = float4{0.f, 0.f, 0.f, 0.f};
      }
    } else {
      for (int c = lane; c < padded; c += 32) d[c] = src && c < cols ? src[c] : 0.f;
    }
  }
}

// Running sums of la over the chunk's steps into cum[0, T), T <= 64, by
// one whole warp: it loads them side by side and scans with shuffles (a
// loop of dependent global loads on one thread would cost T memory
// latencies).
__device__ void chunk_cumsum(const float* la, int T, float* cum) {
  const int l = threadIdx.x % 32;
  float x0 = l < T ? la[l] : 0.f, x1 = l + 32 < T ? la[l + 32] : 0.f;
  for (int o = 1; o < 32; o *= 2) {
    const float y0 = __shfl_up_sync(0xffffffffu, x0, o), y1 = __shfl_up_sync(0xffffffffu, x1, o);
    if (l >= o) x0 += y0, x1 += y1;
  }
  x1 += __shfl_sync(0xffffffffu, x0, 31);
  if (l < T) cum[l] = x0;
  if (l + 32 < T) cum[l + 32] = x1;
}

// The state kernel's shared memory: K, each head's V, per head and step
// the running decay and the coefficient exp(cum_end - cum_s) w_s.
struct StateSmem {
  int ldv, ldk;
  __host__ __device__ static StateSmem of(int Np, int Pp) { return {pitch(Pp, 8), pitch(Np, 8)}; }
  __host__ __device__ size_t bytes(int heads) const {
    return (size_t(kRows) * (heads * ldv + ldk) + 2 * kRows * heads) * sizeof(float);
  }
};

// Block (b, `heads` heads of one group, chunk): K loaded once for them and
// every head's V with it (one round trip to memory), then each head's
// chunk state V^T K, its rows of V scaled first. The warps take the
// (head, tile) items in turn.
template <bool kSplit>
__global__ void __launch_bounds__(kThreads) chunk_state_kernel(ChunkScanLaunch a, Geometry geo) {
  extern __shared__ float smem[];
  const int heads = geo.state_heads;
  const StateSmem lay = StateSmem::of(geo.Np, geo.Pp);
  float* sK = smem;                              // rows x N
  float* sV = sK + kRows * lay.ldk;              // heads x rows x P: v_s exp(cum_end - cum_s) w_s
  float* cum = sV + heads * kRows * lay.ldv;     // heads x T
  float* coef = cum + heads * kRows;             // heads x T
  // Head blocks fastest: those of a group, which read the same B and C rows,
  // run side by side and share them in L2.
  const int64_t head_blocks = a.H / heads;
  const int64_t h0 = (blockIdx.x % head_blocks) * heads, c = (blockIdx.x / head_blocks) % geo.chunks,
                b = blockIdx.x / (head_blocks * geo.chunks);
  const int64_t t0 = c * geo.T;
  const int T = static_cast<int>(min(int64_t{geo.T}, a.L - t0)), rows = T * geo.R;
  const int warp = threadIdx.x / 32;
  for (int hh = warp; hh < heads; hh += kWarps)
    chunk_cumsum(a.la + ((b * a.H + h0 + hh) * a.L + t0), T, cum + hh * kRows);
  load_rows(sK, lay.ldk, a.k, b, h0, t0, rows, geo.R, geo.N, geo.Np, geo.vec_k);
  for (int hh = 0; hh < heads; ++hh)
    load_rows(sV + hh * kRows * lay.ldv, lay.ldv, a.v, b, h0 + hh, t0, rows, geo.R, geo.P, geo.Pp,
              geo.vec_v);
  __syncthreads();  // the running decays
  for (int i = threadIdx.x; i < heads * kRows; i += blockDim.x) {
    const int hh = i / kRows, t = i % kRows;
    if (t < T)
      coef[i] = decay_exp(cum[hh * kRows + T - 1] - cum[i]) * a.w[(b * a.H + h0 + hh) * a.L + t0 + t];
  }
  if (threadIdx.x < heads) {
    const int64_t bh = b * a.H + h0 + threadIdx.x;
    a.chunk_decay[bh * geo.chunks + c] = decay_exp(cum[threadIdx.x * kRows + T - 1]);
  }
  wait_async();
  if constexpr (!kSplit) round_rows(sK, lay.ldk, kRows, geo.Np, geo.vec_k);
  __syncthreads();
  // v_s scaled by exp(cum_end - cum_s) w_s (and rounded to TF32 when the
  // products are): a warp per row (no divisions per element).
  for (int i = warp; i < heads * kRows; i += kWarps) {
    const int hh = i / kRows, row = i % kRows;
    if (row >= rows) continue;
    const float f = coef[hh * kRows + row / geo.R];
    for (int p = threadIdx.x % 32; p < geo.P; p += 32) {
      const float x = sV[i * lay.ldv + p] * f;
      sV[i * lay.ldv + p] = kSplit ? x : round_tf32(x);
    }
  }
  __syncthreads();
  // S_loc (P x N) = V^T (P x rows) K (rows x N), per head.
  const int mt = geo.Pp / 16, nt = static_cast<int>((geo.Np + kTileCols - 1) / kTileCols);
  for (int item = warp; item < heads * mt * nt; item += kWarps) {
    const int hh = item / (mt * nt), tile = item % (mt * nt);
    const int m0 = (tile % mt) * 16, n0 = (tile / mt) * kTileCols;
    float* out = a.chunk_states + ((b * a.H + h0 + hh) * geo.chunks + c) * int64_t{geo.P} * geo.N;
    Acc acc;
    zero(acc);
    product<kSplit>(acc, Smem{sV + hh * kRows * lay.ldv, 1, lay.ldv}, Smem{sK, lay.ldk, 1}, kRows,
                    m0, n0, geo.Np);
    for_each_acc(m0, n0, geo.Np, [&](int p, int n, int j, int e) {
      if (p < geo.P && n < geo.N) out[int64_t{p} * geo.N + n] = acc[j][e];
    });
  }
}

// chunk_states[c] <- the state entering chunk c; the final state to a.state
// (T: its element type; a BF16 state widened exactly, rounded to nearest even).
template <class T>
__global__ void state_pass_kernel(ChunkScanLaunch a, Geometry geo) {
  const int64_t PN = int64_t{geo.P} * geo.N, per_bh = (PN + blockDim.x - 1) / blockDim.x;
  const int64_t bh = blockIdx.x / per_bh, e = (blockIdx.x % per_bh) * blockDim.x + threadIdx.x;
  if (e >= PN) return;
  const int64_t p = e / geo.N, n = e % geo.N;
  T* const state = static_cast<T*>(a.state.p);
  float S = state ? state_value(state[bh * PN + e]) : 0.f;
  if (a.pend) {
    float u = 0.f;
    for (int r = 0; r < geo.R; ++r)
      u += a.v_prev[(bh * geo.R + r) * geo.P + p] * a.k_prev[(bh * geo.R + r) * geo.N + n];
    S += a.pend[bh] * u;
  }
  float* cs = a.chunk_states + bh * geo.chunks * PN + e;
  const float* dec = a.chunk_decay + bh * geo.chunks;
  // Eight chunks' loads issued together before their stores: the walk is
  // sequential, its memory traffic need not be.
  constexpr int kAhead = 8;
  for (int64_t c0 = 0; c0 < geo.chunks; c0 += kAhead) {
    float own[kAhead], d[kAhead];
#pragma unroll
    for (int j = 0; j < kAhead; ++j) {
      own[j] = c0 + j < geo.chunks ? cs[(c0 + j) * PN] : 0.f;
      d[j] = c0 + j < geo.chunks ? dec[c0 + j] : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kAhead; ++j)
      if (c0 + j < geo.chunks) {
        cs[(c0 + j) * PN] = S;
        S = d[j] * S + own[j];
      }
  }
  if (state) set_state_value(state[bh * PN + e], S);
}

// The output kernel's shared memory: Q, then K (until C B^T is made) and
// the entering state S_in (after) in one space, V, G, per head and row of
// the chunk the running decay and the weights, and per row its step. K and
// S_in sharing a space is what fits two blocks on a multiprocessor (104 KB
// each at N = 128, P = 64, where the five tiles apart took 138 KB and left
// one block, whose loads, products and stores could not overlap with
// another's).
struct OutSmem {
  int ldq, ldk, ldv, ldg, lds;
  __host__ __device__ static OutSmem of(int Np, int Pp) {
    return {pitch(Np, 4), pitch(Np, 4), pitch(Pp, 8), pitch(kRows, 4), pitch(Np, 4)};
  }
  __host__ __device__ int64_t ks_floats(int Pp) const {
    return kRows * ldk > int64_t{Pp} * lds ? kRows * ldk : int64_t{Pp} * lds;
  }
  __host__ __device__ size_t bytes(int Pp, int heads) const {
    return size_t(int64_t{kRows} * (ldq + ldv + ldg) + ks_floats(Pp) + 3 * kRows * heads) *
               sizeof(float) +
           kRows * sizeof(int);
  }
};

// The entering state (P x N, dense) into a pitch-`ld` matrix of Pp x Np,
// zeros around it; a warp per row of P, as load_rows.
__device__ void load_state(float* dst, int ld, const float* S_in, int P, int N, int Pp, int Np) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int p = warp; p < Pp; p += kWarps) {
    float* d = dst + p * ld;
    const float* src = p < P ? S_in + int64_t{p} * N : nullptr;
    if (N % 4 == 0) {
      for (int n = 4 * lane; n < Np; n += 128) {
        if (src && n < N)
          copy16_async(d + n, src + n);
        else
          *reinterpret_cast<float4*>(d + n) = float4{0.f, 0.f, 0.f, 0.f};
      }
    } else {
      for (int n = lane; n < Np; n += 32) d[n] = src && n < N ? src[n] : 0.f;
    }
  }
}

// Block (b, `heads` heads of one group, chunk). C B^T (Q K^T) is the same
// for every head of a group: each warp makes one 16 x 32 tile of it once
// and keeps it in registers. Then per head: G = C B^T masked and weighted
// by the head's decays into shared memory, and, K's space holding the
// head's S_in, each warp's output tile as G V plus exp(cum_t) times the
// tile of Q S_in^T (two accumulators, summed in the epilogue: Q is not
// rescaled in shared memory, a pass over it with two integer divisions an
// element), plus D v. Q and K are loaded once for all the block's heads;
// a head costs one round trip to memory (its V and S_in), where a block
// per head paid two (Q, K, V, then S_in) and the C B^T product. Every
// head's sums run in the same order whatever `heads` is, so the results
// are the same bits. Two blocks a multiprocessor: at most 128 registers a
// thread.
template <bool kSplit>
__global__ void __launch_bounds__(kThreads, 2) chunk_output_kernel(ChunkScanLaunch a, Geometry geo) {
  extern __shared__ float smem[];
  const int heads = geo.heads;
  const OutSmem lay = OutSmem::of(geo.Np, geo.Pp);
  float* sQ = smem;                          // rows x N
  float* sKS = sQ + kRows * lay.ldq;         // rows x N (K), then P x N (S_in)
  float* sV = sKS + lay.ks_floats(geo.Pp);   // rows x P
  float* sG = sV + kRows * lay.ldv;          // rows x rows
  float* cum = sG + kRows * lay.ldg;         // heads x T
  float* w = cum + kRows * heads;            // heads x T
  float* wd = w + kRows * heads;             // heads x T
  int* step = reinterpret_cast<int*>(wd + kRows * heads);  // rows: row / R
  // Head blocks fastest: those of a group, which read the same B and C rows,
  // run side by side and share them in L2.
  const int64_t head_blocks = a.H / heads;
  const int64_t h0 = (blockIdx.x % head_blocks) * heads, c = (blockIdx.x / head_blocks) % geo.chunks,
                b = blockIdx.x / (head_blocks * geo.chunks);
  const int64_t t0 = c * geo.T;
  const int T = static_cast<int>(min(int64_t{geo.T}, a.L - t0)), R = geo.R, rows = T * R;
  const int warp = threadIdx.x / 32;
  for (int hh = warp; hh < heads; hh += kWarps)
    chunk_cumsum(a.la + ((b * a.H + h0 + hh) * a.L + t0), T, cum + hh * kRows);
  for (int i = threadIdx.x; i < heads * kRows; i += blockDim.x) {
    const int hh = i / kRows, t = i % kRows;
    if (t < T) {
      const int64_t at = (b * a.H + h0 + hh) * a.L + t0 + t;
      w[i] = a.w[at];
      wd[i] = a.wd[at];
    }
  }
  for (int i = threadIdx.x; i < kRows; i += blockDim.x) step[i] = i / R;
  load_rows(sQ, lay.ldq, a.q, b, h0, t0, rows, R, geo.N, geo.Np, geo.vec_q);
  load_rows(sKS, lay.ldk, a.k, b, h0, t0, rows, R, geo.N, geo.Np, geo.vec_k);
  load_rows(sV, lay.ldv, a.v, b, h0, t0, rows, R, geo.P, geo.Pp, geo.vec_v);
  wait_async();
  if constexpr (!kSplit) {
    round_rows(sQ, lay.ldq, kRows, geo.Np, geo.vec_q);
    round_rows(sKS, lay.ldk, kRows, geo.Np, geo.vec_k);
    round_rows(sV, lay.ldv, kRows, geo.Pp, geo.vec_v);
  }
  __syncthreads();
  constexpr int kMt = kRows / 16;
  static_assert(kMt * (kRows / kTileCols) == kWarps, "a tile of C B^T per warp");
  const int cb_m0 = (warp % kMt) * 16, cb_n0 = (warp / kMt) * kTileCols;
  Acc cb;
  zero(cb);
  product<kSplit>(cb, Smem{sQ, lay.ldq, 1}, Smem{sKS, 1, lay.ldk}, geo.Np, cb_m0, cb_n0, kRows);
  __syncthreads();  // every read of K is done: its space takes S_in
  const int nt = (geo.Pp + kTileCols - 1) / kTileCols;
  const int g = (threadIdx.x % 32) / 4;
  for (int hh = 0; hh < heads; ++hh) {
    const int64_t h = h0 + hh, bh = b * a.H + h;
    if (hh > 0) load_rows(sV, lay.ldv, a.v, b, h, t0, rows, R, geo.P, geo.Pp, geo.vec_v);
    load_state(sKS, lay.lds, a.chunk_states + (bh * geo.chunks + c) * int64_t{geo.P} * geo.N, geo.P,
               geo.N, geo.Pp, geo.Np);
    const float *cum_h = cum + hh * kRows, *w_h = w + hh * kRows, *wd_h = wd + hh * kRows;
    // G = C B^T, masked and weighted by this head's decays.
    for_each_acc(cb_m0, cb_n0, kRows, [&](int i, int j, int jt, int e) {
      const int ti = step[i], sj = step[j];
      float wgt = 0.f;
      if (i < rows && j < rows) {
        if (sj < ti)
          wgt = decay_exp(cum_h[ti] - cum_h[sj]) * w_h[sj];
        else if (sj == ti)
          wgt = wd_h[sj];
      }
      const float x = cb[jt][e] * wgt;
      sG[i * lay.ldg + j] = kSplit ? x : round_tf32(x);
    });
    wait_async();
    if constexpr (!kSplit) {
      if (hh > 0) round_rows(sV, lay.ldv, kRows, geo.Pp, geo.vec_v);
      round_rows(sKS, lay.lds, geo.Pp, geo.Np, geo.N % 4 == 0);
    }
    __syncthreads();
    const float Dh = a.D ? a.D[h] : 0.f;
    for (int item = warp; item < kMt * nt; item += kWarps) {
      const int m0 = (item % kMt) * 16, n0 = (item / kMt) * kTileCols;
      Acc acc, acc_s;
      zero(acc);
      zero(acc_s);
      product<kSplit>(acc, Smem{sG, lay.ldg, 1}, Smem{sV, lay.ldv, 1}, kRows, m0, n0, geo.Pp);
      product<kSplit>(acc_s, Smem{sQ, lay.ldq, 1}, Smem{sKS, 1, lay.lds}, geo.Np, m0, n0, geo.Pp);
      // A lane's accumulators are of rows m0 + g (elements 0, 1) and m0 + g + 8 (2, 3).
      const float e0 = decay_exp(cum_h[step[m0 + g]]), e1 = decay_exp(cum_h[step[m0 + g + 8]]);
#pragma unroll
      for (int j = 0; j < kTileCols / 8; ++j) {
        acc[j][0] += e0 * acc_s[j][0];
        acc[j][1] += e0 * acc_s[j][1];
        acc[j][2] += e1 * acc_s[j][2];
        acc[j][3] += e1 * acc_s[j][3];
      }
      for_each_acc(m0, n0, geo.Pp, [&](int i, int p, int j, int e) {
        if (i < rows && p < geo.P) {
          const int64_t t = t0 + step[i], r = i - step[i] * R;
          a.o.p[b * a.o.sb + h * a.o.sh + t * a.o.st + r * a.o.sr + p] =
              acc[j][e] + Dh * sV[i * lay.ldv + p];
        }
      });
    }
    if (hh + 1 < heads) __syncthreads();  // before the next head's V, S_in and G
  }
}

Geometry geometry_of(const ChunkScanLaunch& a) {
  Geometry g;
  g.T = static_cast<int>(chunk_scan_steps(a.R));
  g.R = static_cast<int>(a.R);
  g.N = static_cast<int>(a.N);
  g.P = static_cast<int>(a.P);
  g.Np = static_cast<int>(round_up(a.N, 16));
  g.Pp = static_cast<int>(round_up(a.P, 16));
  g.chunks = chunk_scan_chunks(a.L, a.R);
  g.vec_q = vec_ok(a.q, a.N);
  g.vec_k = vec_ok(a.k, a.N);
  g.vec_v = vec_ok(a.v, a.P);
  g.heads = g.state_heads = 1;
  return g;
}

constexpr int kMaxSmem = 200 * 1024;
// Output blocks wanted at the least: one on each of an H100's 132
// multiprocessors (measured at the 130m shapes: 4 heads a block, 192
// blocks, beat 2 heads, 384, at 1 x 2048; 8 heads, 768 blocks, won at 8 x
// 2048).
constexpr int64_t kFullWave = 132;

// Heads an output block takes: the largest power of two up to 8 (or up to
// ChunkScanLaunch::forced_heads, from SSM_CUDA_SCAN_HEADS = 1, 2, 4 or 8,
// for measuring) that divides the heads sharing q and k rows (a group's; 1 for
// Mamba-3, whose q and k are per head), fits shared memory and, unless
// forced, leaves at least kFullWave blocks.
int heads_per_block(const ChunkScanLaunch& a, const Geometry& geo) {
  const int64_t share = std::gcd(a.q.hdiv, a.k.hdiv);
  const bool forced = a.forced_heads > 0;
  const int most = forced ? a.forced_heads : 8;
  for (int heads = most; heads > 1; heads /= 2)
    if (share % heads == 0 && a.H % heads == 0 &&
        OutSmem::of(geo.Np, geo.Pp).bytes(geo.Pp, heads) <= size_t{kMaxSmem} &&
        (forced || a.B * a.H * geo.chunks / heads >= kFullWave))
      return heads;
  return 1;
}

// Heads a state block takes: as many as an output block, fewer where their
// V tiles would leave less than two blocks a multiprocessor (113 KB each
// of an H100's 228 KB).
int state_heads_per_block(const Geometry& geo) {
  int heads = geo.heads;
  while (heads > 1 && StateSmem::of(geo.Np, geo.Pp).bytes(heads) > size_t{113} * 1024) heads /= 2;
  return heads;
}

__global__ void prepare_ssd_kernel(ConstRows dt, const float* A, int64_t B, int64_t L, float* la,
                                   float* w, float* wd) {
  const int64_t H = dt.cols, n = B * H * L;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i % L, bh = i / L, h = bh % H, b = bh / H;
    const float d = dt.p[(b * L + t) * dt.stride + h];
    la[i] = d * A[h];
    w[i] = d;
    wd[i] = d;
  }
}

__global__ void prepare_mamba3_kernel(const float* dt, const float* A, const float* lam, int64_t n,
                                      int64_t L, float* la, float* w, float* wd, float* pend) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i % L;
    const float own = lam[i] * dt[i];
    la[i] = A[i] * dt[i];
    wd[i] = own;
    w[i] = own + (t + 1 < L ? (1.f - lam[i + 1]) * dt[i + 1] : 0.f);
    if (t == 0 && pend) pend[i / L] = (1.f - lam[i]) * dt[i];
  }
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 65535 * 16));
}

}  // namespace

int64_t chunk_scan_steps(int64_t R) {
  return std::max<int64_t>(1, kRows / std::max<int64_t>(1, R));
}
int64_t chunk_scan_chunks(int64_t L, int64_t R) {
  const int64_t T = chunk_scan_steps(R);
  return (L + T - 1) / T;
}

bool chunk_scan_fits(int64_t R, int64_t N, int64_t P) {
  if (R > kRows || N < 1 || P < 1) return false;
  const int Np = static_cast<int>(round_up(N, 16)), Pp = static_cast<int>(round_up(P, 16));
  return OutSmem::of(Np, Pp).bytes(Pp, 1) <= size_t{kMaxSmem} &&
         StateSmem::of(Np, Pp).bytes(1) <= size_t{kMaxSmem};
}

void launch_chunk_prepare_ssd(ConstRows dt, const float* A, int64_t B, int64_t L, float* la,
                              float* w, float* wd, cudaStream_t s) {
  prepare_ssd_kernel<<<grid_for(B * dt.cols * L), 256, 0, s>>>(dt, A, B, L, la, w, wd);
}

void launch_chunk_prepare_mamba3(const float* dt, const float* A, const float* lam, int64_t B,
                                 int64_t H, int64_t L, float* la, float* w, float* wd, float* pend,
                                 cudaStream_t s) {
  prepare_mamba3_kernel<<<grid_for(B * H * L), 256, 0, s>>>(dt, A, lam, B * H * L, L, la, w, wd,
                                                            pend);
}

void launch_chunk_scan(const ChunkScanLaunch& a, cudaStream_t s) {
  Geometry geo = geometry_of(a);
  geo.heads = heads_per_block(a, geo);
  geo.state_heads = state_heads_per_block(geo);
  const int64_t blocks = a.B * a.H * geo.chunks;
  const size_t state_smem = StateSmem::of(geo.Np, geo.Pp).bytes(geo.state_heads);
  const size_t out_smem = OutSmem::of(geo.Np, geo.Pp).bytes(geo.Pp, geo.heads);
  // Above 48 KiB a kernel's dynamic shared memory must be allowed first
  // (once per process and kernel; a device's settings outlive the call).
  static const bool allowed = [] {
    // And the largest shared-memory carveout preferred, so that two output
    // blocks (and four state blocks) fit a multiprocessor at the common sizes.
    for (const void* f : {reinterpret_cast<const void*>(chunk_state_kernel<true>),
                          reinterpret_cast<const void*>(chunk_state_kernel<false>),
                          reinterpret_cast<const void*>(chunk_output_kernel<true>),
                          reinterpret_cast<const void*>(chunk_output_kernel<false>)}) {
      cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int{kMaxSmem});
      cudaFuncSetAttribute(f, cudaFuncAttributePreferredSharedMemoryCarveout,
                           int{cudaSharedmemCarveoutMaxShared});
    }
    return true;
  }();
  (void)allowed;
  const unsigned state_grid = static_cast<unsigned>(blocks / geo.state_heads);
  if (a.split)
    chunk_state_kernel<true><<<state_grid, kThreads, state_smem, s>>>(a, geo);
  else
    chunk_state_kernel<false><<<state_grid, kThreads, state_smem, s>>>(a, geo);
  const int64_t PN = a.P * a.N;
  const unsigned pass_grid = static_cast<unsigned>(a.B * a.H * ((PN + 255) / 256));
  if (a.state.bf16)
    state_pass_kernel<__nv_bfloat16><<<pass_grid, 256, 0, s>>>(a, geo);
  else
    state_pass_kernel<float><<<pass_grid, 256, 0, s>>>(a, geo);
  const unsigned out_grid = static_cast<unsigned>(blocks / geo.heads);
  if (a.split)
    chunk_output_kernel<true><<<out_grid, kThreads, out_smem, s>>>(a, geo);
  else
    chunk_output_kernel<false><<<out_grid, kThreads, out_smem, s>>>(a, geo);
}

}  // namespace ssm::cuda

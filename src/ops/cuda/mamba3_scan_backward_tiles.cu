// Passes 1 and 3 of mamba3_scan's backward (mamba3_scan_backward.cu, whose
// header gives the math) on the tensor cores, for chunks of 64 rows of
// (time, rank) (T = 64 / R steps) whose tiles fit shared memory
// (mamba3_backward_tiles_fit), taken only when the context rounds its
// products (Mamba3ScanBackwardLaunch::split false: training with --bf16),
// as the SSD backward's tiles are: the exact path keeps the general kernels
// and their double sums (F32 accumulators lost the decay's gradient there).
//   chunk_sums      a block per (b, h, chunk) and per side: the chunk's own
//                   end state V^T diag(ef w) K (side 0, V = v, K = k) or its
//                   state gradient at its start dO^T diag(ein) Q (side 1),
//                   a P x 64 by 64 x N product each;
//   chunk_backward  a block of 16 warps per (b, h, chunk), every operand
//                   resident (207 KiB at P 64, N 128): the masked 64 x 64 matrices
//                   q_i.k_j and d_o_i.v_j (then weighted by W_ij), and
//                     dv = (W o QK)^T dO + diag(ef w) K F^T + D dO
//                     dk = (W o DV)^T Q + diag(ef w) V F
//                     dq = (W o DV) K + diag(ein) dO S_in
//                   rows i = (t, r) with ef, w, ein those of step t; the
//                   per-step sums dw, dwd and g as the general kernel's
//                   (Z from the unweighted matrices, sums in double, each
//                   split over a few lanes; the
//                   row sums ef v_j.F k_j and ein d_o_i.S_in q_i from the
//                   accumulators of dv and dq). dv, dk and dq are one
//                   phase of warp items after one barrier.
// Every product is warp tiles of mma.sync m16n8k8 (tf32_warp_tiles.h), one
// TF32 product each (the 3xTF32 split is compiled too, unused while the
// exact path keeps the general kernels), F32 accumulation, each sum over k
// in a fixed order, so results repeat bit for bit. Products with a causal
// factor run only over the k that can be nonzero.
#include <algorithm>

#include "ops/cuda/launch_mamba3_attention_backward.h"
#include "ops/cuda/mamba3_scan_backward_scratch.h"
#include "ops/cuda/tf32_mma.h"
#include "ops/cuda/tf32_warp_tiles.h"

namespace ssm::cuda {
namespace {

using mamba3_backward::Scratch;
using mamba3_backward::scratch_of;
using tiles::Acc;
using tiles::for_each_acc;
using tiles::kTileCols;
using tiles::load_rows;
using tiles::pitch;
using tiles::round_up;
using tiles::Smem;
using tiles::warp_mma;

constexpr int kRows = 64;  // rows of (time, rank) per chunk
constexpr int kWarps = 8;  // chunk_sums
constexpr int kThreads = kWarps * 32;
constexpr int kBackWarps = 16;  // chunk_backward: one block an SM, as its shared memory allows
constexpr int kBackThreads = kBackWarps * 32;
constexpr size_t kMaxSmem = 227 * 1024;  // a block's most on the H100 and H200
constexpr int kMt = kRows / 16;          // warp tiles down a chunk's rows

struct Geometry {
  int P, N, Pp, Np, R, T;  // sizes, P and N padded to 16, steps per chunk
  int64_t chunks;
  bool vec_p, vec_n;  // rows of P (v, d_o) or N (q, k, states) copied in 16-byte pieces
};

struct Chunk {
  int64_t bh, h, t0, row0, slot;  // slot: bh chunks + c, the scratch's order
  int len, rows;                  // its steps and rows (the last chunk may be short)
};

__device__ Chunk chunk_of(const Mamba3ScanBackwardLaunch& a, const Geometry& geo) {
  Chunk k;
  k.slot = blockIdx.x;
  k.bh = k.slot / geo.chunks;
  k.h = k.bh % a.H;
  k.t0 = (k.slot % geo.chunks) * geo.T;
  k.len = static_cast<int>(min(int64_t{geo.T}, a.L - k.t0));
  k.rows = k.len * geo.R;
  k.row0 = (k.bh * a.L + k.t0) * geo.R;
  return k;
}

// A chunk's per-step weights (kRows floats each, zeros past its end): cs
// (the inclusive log decay from the chunk's start), w, wd, ef = exp(cs_last
// - cs_s), ein = exp(cs_t).
struct Steps {
  float *cs, *w, *wd, *ef, *ein;
  __device__ static Steps at(float* p) {
    return {p, p + kRows, p + 2 * kRows, p + 3 * kRows, p + 4 * kRows};
  }
};

// The first warp computes them (cs by a shuffle scan); ends with a barrier.
__device__ void load_steps(const Mamba3ScanBackwardLaunch& a, const Chunk& k, const Steps& s) {
  if (threadIdx.x < 32) {
    const int l = threadIdx.x;
    const int64_t base = k.bh * a.L + k.t0;
    float x[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = l + 32 * half;
      float la = 0.f, w = 0.f, wd = 0.f;
      if (t < k.len) {
        const int64_t g = base + t;
        wd = a.lam[g] * a.dt[g];
        w = wd + (k.t0 + t + 1 < a.L ? (1.f - a.lam[g + 1]) * a.dt[g + 1] : 0.f);
        la = a.A[g] * a.dt[g];
      }
      s.w[t] = w;
      s.wd[t] = wd;
      x[half] = la;
    }
    for (int o = 1; o < 32; o *= 2) {
      const float y0 = __shfl_up_sync(0xffffffffu, x[0], o), y1 = __shfl_up_sync(0xffffffffu, x[1], o);
      if (l >= o) x[0] += y0, x[1] += y1;
    }
    x[1] += __shfl_sync(0xffffffffu, x[0], 31);
    const float last = __shfl_sync(0xffffffffu, k.len > 32 ? x[1] : x[0], (k.len - 1) % 32);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = l + 32 * half;
      s.cs[t] = x[half];
      s.ef[t] = t < k.len ? expf(last - x[half]) : 0.f;
      s.ein[t] = t < k.len ? expf(x[half]) : 0.f;
    }
  }
  __syncthreads();
}

// A value as staged for the products: rounded to TF32 once (warp_mma's
// kRoundedA, kRoundedB) where each product is one TF32 product, so that its
// fragments need no conversion (the same bits as converting them), else
// as it is (the 3xTF32 split needs the whole float).
template <bool kR>
__device__ float staged(float v) {
  if constexpr (kR)
    return tiles::round_tf32(v);
  else
    return v;
}

struct SumsSmem {
  int ldv, ldk;
  __host__ __device__ static SumsSmem of(const Geometry& g) {
    return {pitch(g.Pp, 8), pitch(g.Np, 8)};
  }
  __host__ __device__ size_t bytes() const {
    return (size_t(kRows) * (ldv + ldk) + 5 * kRows) * sizeof(float);
  }
};

template <bool kSplit>
__global__ void __launch_bounds__(kThreads)
    chunk_sums_kernel(Mamba3ScanBackwardLaunch a, Geometry geo) {
  constexpr bool kR = !kSplit;  // operands staged as TF32
  extern __shared__ float smem[];
  const SumsSmem lay = SumsSmem::of(geo);
  float* sV = smem;                  // 64 x P: v or d_o, rows weighted
  float* sK = sV + kRows * lay.ldv;  // 64 x N: k or q
  const Steps st = Steps::at(sK + kRows * lay.ldk);
  const Chunk k = chunk_of(a, geo);
  const bool grad = blockIdx.y == 1;
  const int P = geo.P, N = geo.N;
  load_rows(sV, lay.ldv, (grad ? a.d_o : a.v) + k.row0 * P, P, k.rows, kRows, P, geo.Pp,
            geo.vec_p);
  load_rows(sK, lay.ldk, (grad ? a.q : a.k) + k.row0 * N, N, k.rows, kRows, N, geo.Np, geo.vec_n);
  wait_async();
  if constexpr (kR) tiles::round_rows(sK, lay.ldk, kRows, geo.Np, geo.vec_n);
  load_steps(a, k, st);
  // Row (s, r) weighted by ef_s w_s (a source's weight at the chunk's end)
  // or ein_s (the start state's weight at output s).
  const int warp = threadIdx.x / 32;
  for (int i = warp; i < k.rows; i += kWarps) {
    const int s = i / geo.R;
    const float wt = grad ? st.ein[s] : st.ef[s] * st.w[s];
    for (int p = threadIdx.x % 32; p < P; p += 32)
      sV[i * lay.ldv + p] = staged<kR>(sV[i * lay.ldv + p] * wt);
  }
  __syncthreads();
  // (P x N) = V^T (P x 64) K (64 x N), over the chunk's rows only.
  const Scratch sc = scratch_of(a);
  const int mt = geo.Pp / 16, nt = (geo.Np + kTileCols - 1) / kTileCols;
  const int K = static_cast<int>(round_up(k.rows, 8));
  float* out = (grad ? sc.dstates : sc.states) + k.slot * P * N;
  for (int item = warp; item < mt * nt; item += kWarps) {
    const int m0 = (item % mt) * 16, n0 = (item / mt) * kTileCols;
    Acc acc;
    tiles::zero(acc);
    warp_mma<kSplit, kR, kR>(acc, Smem{sV, 1, lay.ldv}, Smem{sK, lay.ldk, 1}, 0, K, m0, n0, geo.Np);
    for_each_acc(m0, n0, geo.Np, [&](int p, int n, int j, int e) {
      if (p < P && n < N) out[int64_t{p} * N + n] = acc[j][e];
    });
  }
  if (!grad && threadIdx.x == 0) sc.decay[k.slot] = st.ein[k.len - 1];
}

// The backward kernel's shared memory: per step dw, X (the chunk's own
// parts) and dwd in double; q, k (64 x N), v, d_o (64 x P), F and S_in
// (P x N), QK, DV (64 x 64), the steps' weights, and the row sums of v . F k
// and q . S_in^T d_o per 32 columns.
struct BackSmem {
  // S_in is read only as B(k, n) at k * ld + n: its own pitch, 8 mod 32
  // (tf32_warp_tiles.h), with no bank conflicts; the others are read both
  // ways and keep 4 (or 8 for QK, DV).
  int ldn, ldp, ldm, lds, cip, cin;
  __host__ __device__ static BackSmem of(const Geometry& g) {
    return {pitch(g.Np, 4),
            pitch(g.Pp, 4),
            pitch(kRows, 8),
            pitch(g.Np, 8),
            (g.Pp + kTileCols - 1) / kTileCols,
            (g.Np + kTileCols - 1) / kTileCols};
  }
  __host__ __device__ size_t floats(const Geometry& g) const {
    return size_t(kRows) * (2 * ldn + 2 * ldp + 2 * ldm + 5 + cip + cin) +
           size_t(g.Pp) * (ldn + lds);
  }
  __host__ __device__ size_t bytes(const Geometry& g) const {
    return 3 * kRows * sizeof(double) + floats(g) * sizeof(float);
  }
};

// The rows j that rows [m0, m0 + 16) can reach (step(j) <= step(i)), ends
// rounded to 8; and the first row i that reaches rows [m0, m0 + 16).
__device__ int reach_end(int m0, int R) { return ((m0 + 15) / R + 1) * R; }
__device__ int reached_from(int m0, int R) { return (m0 / R) * R / 8 * 8; }

// Lanes per per-step sum in chunk_backward: the most (a power of two, at
// most a warp) that lets the 2T sums fill the block once.
__device__ int sum_parts(int T) {
  int parts = 1;
  while (parts < 32 && 2 * T * parts * 2 <= kBackThreads) parts *= 2;
  return parts;
}

template <bool kSplit>
__global__ void __launch_bounds__(kBackThreads, 1)
    chunk_backward_kernel(Mamba3ScanBackwardLaunch a, Geometry geo) {
  // Staged as TF32 where the products are one TF32 each: k, F, S_in (read
  // by products only) and QK, DV once weighted (Z reads them before). q,
  // v and d_o stay whole: the row sums, D d_o and Z read them too.
  constexpr bool kR = !kSplit;
  extern __shared__ double smem_d[];
  const BackSmem lay = BackSmem::of(geo);
  double* dw_in = smem_d;
  double* X_in = dw_in + kRows;
  double* dwd = X_in + kRows;
  float* sq = reinterpret_cast<float*>(dwd + kRows);
  float* sk = sq + kRows * lay.ldn;
  float* sv = sk + kRows * lay.ldn;
  float* sgo = sv + kRows * lay.ldp;
  float* sF = sgo + kRows * lay.ldp;  // rows p, columns n
  float* sS = sF + geo.Pp * lay.ldn;  // S_in, likewise
  float* QK = sS + geo.Pp * lay.lds;  // (i, j): q_i.k_j, step(j) <= step(i), then weighted
  float* DV = QK + kRows * lay.ldm;   // (i, j): d_o_i.v_j, likewise
  const Steps st = Steps::at(DV + kRows * lay.ldm);
  float* partF = st.ein + kRows;        // (column item, j): sum over its p of ef v_j.F k_j
  float* partS = partF + kRows * lay.cip;  // (column item, i): sum over its n of q_i . ein S_in^T d_o_i
  const Chunk k = chunk_of(a, geo);
  const Scratch sc = scratch_of(a);
  const int P = geo.P, N = geo.N, R = geo.R, T = geo.T, rows = k.rows;
  const float* S_in = sc.states + k.slot * P * N;
  const float* F = sc.dstates + k.slot * P * N;
  load_rows(sq, lay.ldn, a.q + k.row0 * N, N, rows, kRows, N, geo.Np, geo.vec_n);
  load_rows(sk, lay.ldn, a.k + k.row0 * N, N, rows, kRows, N, geo.Np, geo.vec_n);
  load_rows(sv, lay.ldp, a.v + k.row0 * P, P, rows, kRows, P, geo.Pp, geo.vec_p);
  load_rows(sgo, lay.ldp, a.d_o + k.row0 * P, P, rows, kRows, P, geo.Pp, geo.vec_p);
  load_rows(sF, lay.ldn, F, N, P, geo.Pp, N, geo.Np, geo.vec_n);
  load_rows(sS, lay.lds, S_in, N, P, geo.Pp, N, geo.Np, geo.vec_n);
  wait_async();
  if constexpr (kR) {  // each thread its own pieces: no barrier before
    tiles::round_rows(sk, lay.ldn, kRows, geo.Np, geo.vec_n);
    tiles::round_rows(sF, lay.ldn, geo.Pp, geo.Np, geo.vec_n);
    tiles::round_rows(sS, lay.lds, geo.Pp, geo.Np, geo.vec_n);
  }
  load_steps(a, k, st);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kNt = kRows / kTileCols;
  // QK and DV, masked (tiles past the reach of their rows stay zero).
  for (int item = warp; item < 2 * kMt * kNt; item += kBackWarps) {
    const bool second = item >= kMt * kNt;
    const int it = item % (kMt * kNt), m0 = (it % kMt) * 16, n0 = (it / kMt) * kTileCols;
    const int end = min(kRows, reach_end(m0, R));
    Acc acc;
    tiles::zero(acc);
    if (second)
      warp_mma<kSplit>(acc, Smem{sgo, lay.ldp, 1}, Smem{sv, 1, lay.ldp}, 0, geo.Pp, m0, n0, end);
    else
      warp_mma<kSplit, false, kR>(acc, Smem{sq, lay.ldn, 1}, Smem{sk, 1, lay.ldn}, 0, geo.Np, m0,
                                  n0, end);
    float* M = second ? DV : QK;
    for_each_acc(m0, n0, kRows, [&](int i, int j, int jj, int e) {
      M[i * lay.ldm + j] = i < rows && j / R <= i / R ? acc[jj][e] : 0.f;
    });
  }
  __syncthreads();
  // The per-step sums inside the chunk, from Z_ij = QK_ij DV_ij summed
  // over the ranks of (t, u) (in float, then the sums over steps in double,
  // as the general kernel): dwd_t, dw_t and X_t. Each sum is split over
  // `parts` adjacent lanes (u = part, part + parts, ...; fixed xor tree),
  // so that every warp works: 2T sums of up to T - 1 terms each, where one
  // thread a sum left half of the block idle (SISO: T = 64, 128 threads).
  auto Z = [&](int t, int u) {
    float z = 0.f;
    for (int r = 0; r < R; ++r)
      for (int r2 = 0; r2 < R; ++r2) {
        const int o = (t * R + r) * lay.ldm + u * R + r2;
        z += QK[o] * DV[o];
      }
    return z;
  };
  const int parts = sum_parts(T);
  for (int base = 0; base < 2 * T * parts; base += blockDim.x) {  // whole warps to the shuffles
    const int idx = base + static_cast<int>(threadIdx.x), item = idx / parts, part = idx % parts;
    const int t = item % T;
    const bool live = item < 2 * T && t < k.len, is_dw = item < T;
    double sum = 0;
    if (live && is_dw) {
      for (int u = t + 1 + part; u < k.len; u += parts) sum += expf(st.cs[u] - st.cs[t]) * Z(u, t);
    } else if (live) {
      for (int u = part; u < t; u += parts) sum += expf(st.cs[t] - st.cs[u]) * st.w[u] * Z(t, u);
    }
    for (int o = 1; o < parts; o *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (live && part == 0) {
      if (is_dw) {
        dw_in[t] = sum;
        dwd[t] = Z(t, t);
      } else {
        X_in[t] = sum;
      }
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kRows * kRows; idx += blockDim.x) {
    const int i = idx / kRows, j = idx % kRows, t = i / R, u = j / R;
    if (i >= rows || u > t) continue;  // zeros already
    const float W = u < t ? expf(st.cs[t] - st.cs[u]) * st.w[u] : st.wd[t];
    QK[i * lay.ldm + j] = staged<kR>(QK[i * lay.ldm + j] * W);
    DV[i * lay.ldm + j] = staged<kR>(DV[i * lay.ldm + j] * W);
  }
  __syncthreads();
  const float Dh = a.D ? a.D[k.h] : 0.f;
  const int K = static_cast<int>(round_up(rows, 8));  // rows that can be nonzero
  // One phase for dv, dk and dq (every operand is resident). Per warp item
  // (16 rows x 32 columns) dv costs about 1.5 times dk or dq (SISO: 96
  // m16n8k8 products against 64), so the warps that take a dv item in the
  // first round take the others' items last in the later rounds, which run
  // the warps in reverse: SISO's 40 items give warps 0-7 dv + dq and warps
  // 8-15 three dk or dq (longest chain 192 products; 224 in plain order).
  const int na = kMt * lay.cip, nb = kMt * lay.cin;
  // Sums this lane's row sums (rows m0 + g, m0 + g + 8) over the 4 lanes of
  // a row in a fixed tree, into part (column item ci, row).
  auto put_row_sums = [&](float* part, int ci, int m0, float (&sums)[2]) {
    for (int o = 1; o < 4; o *= 2) {
      sums[0] += __shfl_xor_sync(0xffffffffu, sums[0], o);
      sums[1] += __shfl_xor_sync(0xffffffffu, sums[1], o);
    }
    if (lane % 4 == 0) {
      part[ci * kRows + m0 + lane / 4] = sums[0];
      part[ci * kRows + m0 + lane / 4 + 8] = sums[1];
    }
  };
  for (int round = 0;; ++round) {
    const int item = round * kBackWarps + (round == 0 ? warp : kBackWarps - 1 - warp);
    if (item >= na + 2 * nb) break;
    Acc acc, acc_m;
    tiles::zero(acc);
    tiles::zero(acc_m);
    float sums[2] = {0.f, 0.f};  // this lane's rows m0 + g and m0 + g + 8
    if (item < na) {  // dv (j, p), and the row sums of v . ef F k
      const int m0 = (item % kMt) * 16, ci = item / kMt, n0 = ci * kTileCols;
      warp_mma<kSplit, kR, kR>(acc, Smem{sk, lay.ldn, 1}, Smem{sF, 1, lay.ldn}, 0, geo.Np, m0, n0,
                               geo.Pp);
      warp_mma<kSplit, kR, false>(acc_m, Smem{QK, 1, lay.ldm}, Smem{sgo, lay.ldp, 1},
                                  reached_from(m0, R), K, m0, n0, geo.Pp);
      for_each_acc(m0, n0, geo.Pp, [&](int j, int p, int jj, int e) {
        const int u = j / R;
        const float cross = st.ef[u] * acc[jj][e];
        sums[e / 2] += sv[j * lay.ldp + p] * cross;
        if (j < rows && p < P)
          a.dv[(k.row0 + j) * P + p] = acc_m[jj][e] + st.w[u] * cross + Dh * sgo[j * lay.ldp + p];
      });
      put_row_sums(partF, ci, m0, sums);
    } else if (item < na + nb) {  // dk (j, n)
      const int ib = item - na, m0 = (ib % kMt) * 16, n0 = (ib / kMt) * kTileCols;
      warp_mma<kSplit, false, kR>(acc, Smem{sv, lay.ldp, 1}, Smem{sF, lay.ldn, 1}, 0, geo.Pp, m0,
                                  n0, geo.Np);
      warp_mma<kSplit, kR, false>(acc_m, Smem{DV, 1, lay.ldm}, Smem{sq, lay.ldn, 1},
                                  reached_from(m0, R), K, m0, n0, geo.Np);
      for_each_acc(m0, n0, geo.Np, [&](int j, int n, int jj, int e) {
        const int u = j / R;
        if (j < rows && n < N)
          a.dk[(k.row0 + j) * N + n] = acc_m[jj][e] + st.ef[u] * st.w[u] * acc[jj][e];
      });
    } else {  // dq (i, n), and the row sums of q . ein S_in^T d_o
      const int ib = item - na - nb, m0 = (ib % kMt) * 16, ci = ib / kMt, n0 = ci * kTileCols;
      warp_mma<kSplit, false, kR>(acc, Smem{sgo, lay.ldp, 1}, Smem{sS, lay.lds, 1}, 0, geo.Pp, m0,
                                  n0, geo.Np);
      warp_mma<kSplit, kR, kR>(acc_m, Smem{DV, lay.ldm, 1}, Smem{sk, lay.ldn, 1}, 0,
                               min(static_cast<int>(round_up(reach_end(m0, R), 8)), K), m0, n0,
                               geo.Np);
      for_each_acc(m0, n0, geo.Np, [&](int i, int n, int jj, int e) {
        const float sd = st.ein[i / R] * acc[jj][e];
        sums[e / 2] += sq[i * lay.ldn + n] * sd;
        if (i < rows && n < N) a.dq[(k.row0 + i) * N + n] = acc_m[jj][e] + sd;
      });
      put_row_sums(partS, ci, m0, sums);
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < k.len; t += blockDim.x) {
    double dw = dw_in[t], X = X_in[t];
    for (int r = 0; r < R; ++r) {
      float f = 0.f, s = 0.f;
      for (int ci = 0; ci < lay.cip; ++ci) f += partF[ci * kRows + t * R + r];
      for (int ci = 0; ci < lay.cin; ++ci) s += partS[ci * kRows + t * R + r];
      dw += f;
      X += s;
    }
    float* out = sc.steps + (k.bh * a.L + k.t0 + t) * 3;
    out[0] = static_cast<float>(dw);
    out[1] = static_cast<float>(dwd[t]);
    out[2] = static_cast<float>(X - st.w[t] * dw);
  }
}

Geometry geometry_of(const Mamba3ScanBackwardLaunch& a) {
  Geometry g;
  g.P = static_cast<int>(a.P);
  g.N = static_cast<int>(a.N);
  g.Pp = static_cast<int>(round_up(a.P, 16));
  g.Np = static_cast<int>(round_up(a.N, 16));
  g.R = static_cast<int>(a.R);
  g.T = kRows / g.R;
  g.chunks = (a.L + g.T - 1) / g.T;
  auto aligned = [](const float* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  g.vec_p = a.P % 4 == 0 && aligned(a.v) && aligned(a.d_o);
  g.vec_n = a.N % 4 == 0 && aligned(a.q) && aligned(a.k) && aligned(a.scratch);
  return g;
}

size_t sums_bytes(const Geometry& g) { return SumsSmem::of(g).bytes(); }
size_t backward_bytes(const Geometry& g) { return BackSmem::of(g).bytes(g); }

}  // namespace

bool mamba3_backward_tiles_fit(int64_t R, int64_t P, int64_t N) {
  if (R < 1 || kRows % R != 0 || P < 1 || N < 1 || P > 4096 || N > 4096) return false;
  Mamba3ScanBackwardLaunch a{};
  a.R = R;
  a.P = P;
  a.N = N;
  const Geometry g = geometry_of(a);
  return sums_bytes(g) <= kMaxSmem && backward_bytes(g) <= kMaxSmem;
}

void launch_mamba3_chunk_sums_tiles(const Mamba3ScanBackwardLaunch& a, cudaStream_t s) {
  const Geometry geo = geometry_of(a);
  // Above 48 KiB a kernel's dynamic shared memory must be allowed first.
  static const bool allowed = [] {
    for (const void* f : {reinterpret_cast<const void*>(chunk_sums_kernel<true>),
                          reinterpret_cast<const void*>(chunk_sums_kernel<false>),
                          reinterpret_cast<const void*>(chunk_backward_kernel<true>),
                          reinterpret_cast<const void*>(chunk_backward_kernel<false>)})
      cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int{kMaxSmem});
    return true;
  }();
  (void)allowed;
  const dim3 grid(static_cast<unsigned>(a.B * a.H * geo.chunks), 2);
  if (a.split)
    chunk_sums_kernel<true><<<grid, kThreads, sums_bytes(geo), s>>>(a, geo);
  else
    chunk_sums_kernel<false><<<grid, kThreads, sums_bytes(geo), s>>>(a, geo);
}

void launch_mamba3_chunk_backward_tiles(const Mamba3ScanBackwardLaunch& a, cudaStream_t s) {
  const Geometry geo = geometry_of(a);
  const unsigned grid = static_cast<unsigned>(a.B * a.H * geo.chunks);
  if (a.split)
    chunk_backward_kernel<true><<<grid, kBackThreads, backward_bytes(geo), s>>>(a, geo);
  else
    chunk_backward_kernel<false><<<grid, kBackThreads, backward_bytes(geo), s>>>(a, geo);
}

}  // namespace ssm::cuda

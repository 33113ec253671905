// mamba3_scan backward on the GPU in the chunked form: parallel over (batch
// row, head, chunk of T steps), with two short sequential passes over the
// chunks (L / T steps each) for what crosses chunk boundaries, as
// ssd_scan_backward.cu does for SSD.
//
// The forward's folding (chunk_scan.cu, cpu/mamba3_scan.cpp) turns the
// trapezoid into an SSD recurrence on the look-ahead state
//   S'_t = exp(a_t) S'_{t-1} + w_t U_t,     U_t = sum_r v_t,r k_t,r^T,
//   o_t,r = (exp(a_t) S'_{t-1} + wd_t U_t) q_t,r + D v_t,r,
// a_t = A_t dt_t, wd_t = lam_t dt_t, w_t = wd_t + (1 - lam_{t+1}) dt_{t+1}
// (no second term at the last step), S'_{-1} = S + (1 - lam_0) dt_0 U_{-1}
// (the carried state and the pending previous step). Inside a chunk, rows
// i = (t, r) and j = (s, r') have the weight W_ij = exp(cs_t - cs_s) w_s for
// s < t, wd_t for s = t, 0 for s > t (cs: the log decay summed from the
// chunk's start, inclusive). With S_in the S' entering the chunk and F the
// gradient reaching the S' leaving it (from later chunks):
//   dv_j = sum_i W_ij (q_i.k_j) d_o_i + exp(cs_last - cs_s) w_s F k_j + D d_o_j
//   dk_j = sum_i W_ij (d_o_i.v_j) q_i + exp(cs_last - cs_s) w_s F^T v_j
//   dq_i = sum_j W_ij (d_o_i.v_j) k_j + exp(cs_t) S_in^T d_o_i
//   dwd_t = sum of Z_ij over rows of step t, Z_ij = (q_i.k_j)(d_o_i.v_j)
//   dw_s  = sum over t > s of exp(cs_t - cs_s) Z + exp(cs_last - cs_s) <F, U_s>
// The log decay a_u enters every path from a source s < u to a target t >= u,
// so d/da_u = sum_{j >= u} g_j with g_j = X_j - Y_j: X_t the part of step
// t's outputs that comes from earlier steps (dotted with d_o), Y_s = w_s dw_s
// what source s gives later steps; a reverse cumulative sum over time in
// double. Then (w_{-1} = (1 - lam_0) dt_0, its gradient <dS'_{-1}, U_{-1}>):
//   dA_t = dt_t da_t
//   ddt_t = A_t da_t + lam_t (dw_t + dwd_t) + (1 - lam_t) dw_{t-1}
//   dlam_t = dt_t (dw_t + dwd_t) - dt_t dw_{t-1}
// Kernels:
//   1 chunk_sums      per chunk: its own end state and its state gradient at
//                     its start (sources, outputs in the chunk)
//   2 chunk_pass      per (b, h) and 4 (p, n), over chunks: S_in and F of
//                     each chunk, and dS'_{-1} for the carried previous step
//   3 chunk_backward  per chunk: dq, dk, dv, and per step dw, dwd, g
//   4 step_grads      per (b, h): dS'_{-1}.U_{-1}, the reverse sum of g, and
//                     ddt, dA, dlam
//   5 skip_grad       per head: dD (partial sums over 64 ranges, then those)
// Every sum has a fixed order (no atomics): results repeat bit for bit.
#include <algorithm>
#include <cstdint>

#include "ops/cuda/float_runs.h"
#include "ops/cuda/launch_mamba3_attention_backward.h"
#include "ops/cuda/mamba3_scan_backward_scratch.h"

namespace ssm::cuda {
namespace {

using mamba3_backward::Scratch;
using mamba3_backward::scratch_of;

constexpr int kThreads = 256;
constexpr int64_t kMaxSmem = 200 * 1024;  // of the H200's 227 KiB per block
constexpr int64_t kChunkRows = 64;        // rows of (time, rank) per chunk

// Sums v over the block (every thread gets the total); red: kThreads / 32
// doubles of shared memory. Begins and ends with the block in step.
__device__ double block_sum(double v, double* red) {
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += red[w];
  __syncthreads();
  return total;
}

struct Chunk {
  int64_t bh, h, c, t0, row0;  // row0: the chunk's first (t, r) row of all B*H*L*R
  int T, rows;                 // its steps and rows (the last chunk may be short)
};

__device__ Chunk chunk_of(const Mamba3ScanBackwardLaunch& a, int64_t block) {
  const int64_t nc = (a.L + a.T - 1) / a.T;
  Chunk k;
  k.c = block % nc;
  k.bh = block / nc;
  k.h = k.bh % a.H;
  k.t0 = k.c * a.T;
  k.T = static_cast<int>(min(a.T, a.L - k.t0));
  k.rows = k.T * static_cast<int>(a.R);
  k.row0 = (k.bh * a.L + k.t0) * a.R;
  return k;
}

// A chunk's per-step weights in shared memory (T floats each): cs (the
// inclusive log decay from the chunk's start), w, wd, ef = exp(cs_last -
// cs_s) and ein = exp(cs_t).
struct Steps {
  float *cs, *w, *wd, *ef, *ein;
};
__device__ Steps load_steps(const Mamba3ScanBackwardLaunch& a, const Chunk& k, float* smem,
                            int64_t T) {
  Steps s{smem, smem + T, smem + 2 * T, smem + 3 * T, smem + 4 * T};
  const float* dt = a.dt + k.bh * a.L;
  const float* A = a.A + k.bh * a.L;
  const float* lam = a.lam + k.bh * a.L;
  for (int t = threadIdx.x; t < k.T; t += blockDim.x) {
    const int64_t g = k.t0 + t;
    s.wd[t] = lam[g] * dt[g];
    s.w[t] = s.wd[t] + (g + 1 < a.L ? (1.f - lam[g + 1]) * dt[g + 1] : 0.f);
    s.cs[t] = A[g] * dt[g];
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int t = 1; t < k.T; ++t) s.cs[t] += s.cs[t - 1];
  __syncthreads();
  const float last = s.cs[k.T - 1];
  for (int t = threadIdx.x; t < k.T; t += blockDim.x) {
    s.ef[t] = expf(last - s.cs[t]);
    s.ein[t] = expf(s.cs[t]);
  }
  __syncthreads();
  return s;
}

__global__ void chunk_sums_kernel(Mamba3ScanBackwardLaunch a) {
  extern __shared__ float smem[];
  const Chunk k = chunk_of(a, blockIdx.x);
  const Steps st = load_steps(a, k, smem, a.T);
  const Scratch sc = scratch_of(a);
  const int64_t P = a.P, N = a.N, R = a.R, PN = P * N;
  const float* q = a.q + k.row0 * N;
  const float* kk = a.k + k.row0 * N;
  const float* v = a.v + k.row0 * P;
  const float* d_o = a.d_o + k.row0 * P;
  const int64_t slot = k.bh * ((a.L + a.T - 1) / a.T) + k.c;
  for (int64_t i = threadIdx.x; i < PN; i += blockDim.x) {
    const int64_t p = i / N, n = i % N;
    float own = 0.f, down = 0.f;
    for (int j = 0; j < k.rows; ++j) {
      const int s = j / static_cast<int>(R);
      own += st.ef[s] * st.w[s] * v[j * P + p] * kk[j * N + n];
      down += st.ein[s] * d_o[j * P + p] * q[j * N + n];
    }
    sc.states[slot * PN + i] = own;
    sc.dstates[slot * PN + i] = down;
  }
  if (threadIdx.x == 0) sc.decay[slot] = st.ein[k.T - 1];
}

// Thread per (b, h) and W consecutive (p, n): S_in of each chunk forward,
// F of each backward (walk_chunk_states, as the SSD backward's), W = 4
// floats a load where aligned.
template <int W>
__global__ void chunk_pass_kernel(Mamba3ScanBackwardLaunch a) {
  const int64_t P = a.P, N = a.N, PN = P * N, nc = (a.L + a.T - 1) / a.T;
  const int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * W;
  if (i >= a.B * a.H * PN) return;
  const int64_t bh = i / PN, e = i % PN;
  const Scratch sc = scratch_of(a);
  float* S = sc.states + bh * nc * PN + e;
  float* F = sc.dstates + bh * nc * PN + e;
  const float* decay = sc.decay + bh * nc;
  double run_s[W], run_f[W];
  for (int w = 0; w < W; ++w) {
    run_s[w] = 0;
    run_f[w] = 0;
    if (a.ssm) {
      // S'_{-1}: the carried state and the previous step still pending.
      const int64_t p = (e + w) / N, n = (e + w) % N;
      float u = 0.f;
      for (int64_t r = 0; r < a.R; ++r)
        u += a.v_prev[(bh * a.R + r) * P + p] * a.k_prev[(bh * a.R + r) * N + n];
      run_s[w] = a.ssm[i + w] + (1.f - a.lam[bh * a.L]) * a.dt[bh * a.L] * u;
    }
  }
  walk_chunk_states<W>(S, F, decay, nc, PN, run_s, run_f);
  for (int w = 0; w < W; ++w) sc.dstart[i + w] = static_cast<float>(run_f[w]);
}

// The chunk's tiles in shared memory, rows padded by one float so that
// threads walking one column of successive rows hit different banks.
struct Tiles {
  double *dwd, *dw, *X;   // T each: per-step sums
  float *q, *k, *v, *go;  // rows x (N + 1) or (P + 1)
  float *QK, *DV;         // rows x (rows + 1): q_i.k_j, d_o_i.v_j, then weighted
  float* cross;           // rows x (P + 1): F k_j, then S_in q_i
  float* Zs;              // T x T: Z summed over the ranks of (t, s)
  float *rowF, *rowS;     // rows: ef_s v_j.F k_j, ein_t d_o_i.S_in q_i
  float* steps;           // 5 T: Steps
  int64_t ln, lp, lq;     // padded row strides
};

int64_t backward_smem(int64_t T, int64_t R, int64_t P, int64_t N) {
  const int64_t M = T * R;
  const int64_t floats =
      2 * M * (N + 1) + 3 * M * (P + 1) + 2 * M * (M + 1) + T * T + 2 * M + 5 * T;
  return 3 * T * static_cast<int64_t>(sizeof(double)) +
         floats * static_cast<int64_t>(sizeof(float));
}

__device__ Tiles carve(const Mamba3ScanBackwardLaunch& a, void* smem) {
  const int64_t T = a.T, M = T * a.R, P = a.P, N = a.N;
  Tiles s;
  s.ln = N + 1;
  s.lp = P + 1;
  s.lq = M + 1;
  s.dwd = static_cast<double*>(smem);
  s.dw = s.dwd + T;
  s.X = s.dw + T;
  s.q = reinterpret_cast<float*>(s.X + T);
  s.k = s.q + M * s.ln;
  s.v = s.k + M * s.ln;
  s.go = s.v + M * s.lp;
  s.cross = s.go + M * s.lp;
  s.QK = s.cross + M * s.lp;
  s.DV = s.QK + M * s.lq;
  s.Zs = s.DV + M * s.lq;
  s.rowF = s.Zs + T * T;
  s.rowS = s.rowF + M;
  s.steps = s.rowS + M;
  return s;
}

__device__ void load_tile(float* dst, int64_t dld, const float* src, int rows, int64_t cols) {
  for (int64_t i = threadIdx.x; i < rows * cols; i += blockDim.x)
    dst[(i / cols) * dld + i % cols] = src[i];
}

__global__ void chunk_backward_kernel(Mamba3ScanBackwardLaunch a) {
  extern __shared__ double smem_d[];
  const Chunk k = chunk_of(a, blockIdx.x);
  const Tiles s = carve(a, smem_d);
  const Steps st = load_steps(a, k, s.steps, a.T);
  const Scratch sc = scratch_of(a);
  const int64_t P = a.P, N = a.N, PN = P * N;
  const int R = static_cast<int>(a.R), M = k.rows, T = k.T;
  const int64_t slot = k.bh * ((a.L + a.T - 1) / a.T) + k.c;
  const float* S_in = sc.states + slot * PN;
  const float* F = sc.dstates + slot * PN;
  load_tile(s.q, s.ln, a.q + k.row0 * N, M, N);
  load_tile(s.k, s.ln, a.k + k.row0 * N, M, N);
  load_tile(s.v, s.lp, a.v + k.row0 * P, M, P);
  load_tile(s.go, s.lp, a.d_o + k.row0 * P, M, P);
  __syncthreads();

  // q_i.k_j and d_o_i.v_j where step(j) <= step(i), else 0.
  for (int idx = threadIdx.x; idx < M * M; idx += blockDim.x) {
    const int i = idx / M, j = idx % M;
    float qk = 0.f, dv = 0.f;
    if (j / R <= i / R) {
      for (int64_t n = 0; n < N; ++n) qk += s.q[i * s.ln + n] * s.k[j * s.ln + n];
      for (int64_t p = 0; p < P; ++p) dv += s.go[i * s.lp + p] * s.v[j * s.lp + p];
    }
    s.QK[i * s.lq + j] = qk;
    s.DV[i * s.lq + j] = dv;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < T * T; idx += blockDim.x) {
    const int t = idx / T, u = idx % T;
    float z = 0.f;
    for (int r = 0; r < R; ++r)
      for (int r2 = 0; r2 < R; ++r2) {
        const int64_t o = (t * R + r) * s.lq + u * R + r2;
        z += s.QK[o] * s.DV[o];
      }
    s.Zs[idx] = z;
  }
  __syncthreads();
  // The per-step sums inside the chunk (from Zs), and the weights applied
  // to QK and DV (each thread its own entries; Zs holds what the sums need).
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    double dw = 0, X = 0;
    for (int u = t + 1; u < T; ++u) dw += expf(st.cs[u] - st.cs[t]) * s.Zs[u * T + t];
    for (int u = 0; u < t; ++u) X += expf(st.cs[t] - st.cs[u]) * st.w[u] * s.Zs[t * T + u];
    s.dwd[t] = s.Zs[t * T + t];
    s.dw[t] = dw;
    s.X[t] = X;
  }
  for (int idx = threadIdx.x; idx < M * M; idx += blockDim.x) {
    const int i = idx / M, j = idx % M, t = i / R, u = j / R;
    const float W = u < t ? expf(st.cs[t] - st.cs[u]) * st.w[u] : u == t ? st.wd[t] : 0.f;
    s.QK[i * s.lq + j] *= W;
    s.DV[i * s.lq + j] *= W;
  }
  __syncthreads();

  // The products with F and S_in read those from global memory: a warp's
  // threads share their row (one broadcast load), so rows j or i run
  // fastest there; dq, dk, dv run their own entry (n or p) fastest, so that
  // their loads of the tiles and their stores are consecutive.
  // cross = exp(cs_last - cs_s) F k_j: thread per (p, j), j fastest.
  for (int64_t idx = threadIdx.x; idx < M * P; idx += blockDim.x) {
    const int j = static_cast<int>(idx % M);
    const int64_t p = idx / M;
    float fk = 0.f;
    for (int64_t n = 0; n < N; ++n) fk += F[p * N + n] * s.k[j * s.ln + n];
    s.cross[j * s.lp + p] = st.ef[j / R] * fk;
  }
  __syncthreads();
  // <F, U_s> per row (for dw); dv: thread per (j, p), p fastest; dk: thread
  // per (j, n), n fastest.
  for (int j = threadIdx.x; j < M; j += blockDim.x) {
    float f = 0.f;
    for (int64_t p = 0; p < P; ++p) f += s.v[j * s.lp + p] * s.cross[j * s.lp + p];
    s.rowF[j] = f;
  }
  const float Dh = a.D ? a.D[k.h] : 0.f;
  for (int64_t idx = threadIdx.x; idx < M * P; idx += blockDim.x) {
    const int j = static_cast<int>(idx / P);
    const int64_t p = idx % P;
    const int u = j / R;
    float acc = 0.f;
    for (int i = u * R; i < M; ++i) acc += s.QK[i * s.lq + j] * s.go[i * s.lp + p];
    a.dv[(k.row0 + j) * P + p] = acc + st.w[u] * s.cross[j * s.lp + p] + Dh * s.go[j * s.lp + p];
  }
  for (int64_t idx = threadIdx.x; idx < M * N; idx += blockDim.x) {
    const int j = static_cast<int>(idx / N);
    const int64_t n = idx % N;
    const int u = j / R;
    float acc = 0.f, fv = 0.f;
    for (int i = u * R; i < M; ++i) acc += s.DV[i * s.lq + j] * s.q[i * s.ln + n];
    for (int64_t p = 0; p < P; ++p) fv += F[p * N + n] * s.v[j * s.lp + p];
    a.dk[(k.row0 + j) * N + n] = acc + st.ef[u] * st.w[u] * fv;
  }
  __syncthreads();  // cross read by all before it is overwritten
  // S_in q_i (for X): thread per (p, i), i fastest; dq: thread per (i, n),
  // n fastest.
  for (int64_t idx = threadIdx.x; idx < M * P; idx += blockDim.x) {
    const int i = static_cast<int>(idx % M);
    const int64_t p = idx / M;
    float sq = 0.f;
    for (int64_t n = 0; n < N; ++n) sq += S_in[p * N + n] * s.q[i * s.ln + n];
    s.cross[i * s.lp + p] = sq;
  }
  for (int64_t idx = threadIdx.x; idx < M * N; idx += blockDim.x) {
    const int i = static_cast<int>(idx / N);
    const int64_t n = idx % N;
    const int t = i / R;
    float acc = 0.f, sd = 0.f;
    for (int j = 0; j < (t + 1) * R; ++j) acc += s.DV[i * s.lq + j] * s.k[j * s.ln + n];
    for (int64_t p = 0; p < P; ++p) sd += S_in[p * N + n] * s.go[i * s.lp + p];
    a.dq[(k.row0 + i) * N + n] = acc + st.ein[t] * sd;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < M; i += blockDim.x) {
    float x = 0.f;
    for (int64_t p = 0; p < P; ++p) x += s.go[i * s.lp + p] * s.cross[i * s.lp + p];
    s.rowS[i] = st.ein[i / R] * x;
  }
  __syncthreads();
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    double dw = s.dw[t], X = s.X[t];
    for (int r = 0; r < R; ++r) {
      dw += s.rowF[t * R + r];
      X += s.rowS[t * R + r];
    }
    float* out = sc.steps + (k.bh * a.L + k.t0 + t) * 3;
    out[0] = static_cast<float>(dw);
    out[1] = static_cast<float>(s.dwd[t]);
    out[2] = static_cast<float>(X - st.w[t] * dw);
  }
}

// Block per (b, h): the pending step's gradient dS'_{-1}.U_{-1}, the
// reverse cumulative sum of g over time in double (each thread sums its own
// run of steps, thread 0 turns the run sums into suffix sums, each thread
// walks its run back), then ddt, dA, dlam.
__global__ void __launch_bounds__(kThreads) step_grads_kernel(Mamba3ScanBackwardLaunch a) {
  __shared__ double part[kThreads];
  __shared__ double red[kThreads / 32];
  const int64_t bh = blockIdx.x, L = a.L, P = a.P, N = a.N;
  const Scratch sc = scratch_of(a);
  double pend = 0;
  if (a.ssm) {
    for (int64_t e = threadIdx.x; e < P * N; e += kThreads) {
      const int64_t p = e / N, n = e % N;
      float u = 0.f;
      for (int64_t r = 0; r < a.R; ++r)
        u += a.v_prev[(bh * a.R + r) * P + p] * a.k_prev[(bh * a.R + r) * N + n];
      pend += static_cast<double>(sc.dstart[bh * P * N + e]) * u;
    }
  }
  pend = block_sum(pend, red);
  const int64_t per = (L + kThreads - 1) / kThreads, t0 = threadIdx.x * per;
  const int64_t t1 = t0 + per < L ? t0 + per : L;
  const float* steps = sc.steps + bh * L * 3;
  double own = 0;
  for (int64_t t = t0; t < t1; ++t) own += steps[t * 3 + 2];
  part[threadIdx.x] = own;
  __syncthreads();
  if (threadIdx.x == 0) {
    double after = 0;  // part[j] becomes the sum of the runs after run j
    for (int j = kThreads - 1; j >= 0; --j) {
      const double v = part[j];
      part[j] = after;
      after += v;
    }
  }
  __syncthreads();
  double da = part[threadIdx.x];
  for (int64_t t = t1 - 1; t >= t0; --t) {
    const int64_t o = bh * L + t;
    da += steps[t * 3 + 2];
    const double dt = a.dt[o], lam = a.lam[o];
    const double dw = static_cast<double>(steps[t * 3]) + steps[t * 3 + 1];
    const double prev = t > 0 ? static_cast<double>(steps[(t - 1) * 3]) : pend;
    a.dA[o] = static_cast<float>(dt * da);
    a.ddt[o] = static_cast<float>(a.A[o] * da + lam * dw + (1 - lam) * prev);
    a.dlam[o] = static_cast<float>(dt * (dw - prev));
  }
}

// dD[h] += sum over b, t, r, p of d_o v, in two passes (a block per head
// alone took 0.9 ms a layer at 8 x 2048 on an H100): kSkipParts blocks per
// head each sum one contiguous range of every batch row's (t, r, p), in
// double, into a partial; then a thread per head adds its partials in order.
constexpr int kSkipParts = 64;

__global__ void __launch_bounds__(kThreads) skip_grad_parts_kernel(Mamba3ScanBackwardLaunch a,
                                                                   double* parts) {
  __shared__ double red[kThreads / 32];
  const int64_t h = blockIdx.x, per = a.L * a.R * a.P;
  const int64_t len = (per + kSkipParts - 1) / kSkipParts, i0 = blockIdx.y * len;
  const int64_t i1 = min(per, i0 + len);
  double acc = 0;
  for (int64_t b = 0; b < a.B; ++b) {
    const int64_t base = (b * a.H + h) * per;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += kThreads)
      acc += static_cast<double>(a.d_o[base + i]) * a.v[base + i];
  }
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) parts[h * kSkipParts + blockIdx.y] = acc;
}

__global__ void skip_grad_kernel(Mamba3ScanBackwardLaunch a, const double* parts) {
  const int64_t h = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (h >= a.H) return;
  double acc = 0;
  for (int j = 0; j < kSkipParts; ++j) acc += parts[h * kSkipParts + j];
  a.dD[h] = static_cast<float>(a.dD[h] + acc);
}

// The partials of dD, after the scratch of scratch_of (8-byte aligned).
int64_t skip_parts_offset(int64_t B, int64_t H, int64_t L, int64_t P, int64_t N, int64_t T) {
  const int64_t BH = B * H, nc = (L + T - 1) / T, PN = P * N;
  return (2 * BH * nc * PN + BH * nc + BH * PN + 3 * BH * L + 1) / 2 * 2;
}

unsigned blocks(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace

int64_t mamba3_backward_steps(int64_t R, int64_t P, int64_t N, bool split) {
  if (!split && mamba3_backward_tiles_fit(R, P, N)) return kChunkRows / R;
  int64_t T = std::max<int64_t>(1, kChunkRows / R);
  while (T > 1 && backward_smem(T, R, P, N) > kMaxSmem) T /= 2;
  return T;
}

int64_t mamba3_scan_backward_scratch(int64_t B, int64_t H, int64_t L, int64_t P, int64_t N,
                                     int64_t T) {
  return skip_parts_offset(B, H, L, P, N, T) + 2 * H * kSkipParts;
}

void launch_mamba3_scan_backward(const Mamba3ScanBackwardLaunch& a, cudaStream_t s) {
  if (a.B * a.H * a.L == 0) return;
  const int64_t nc = (a.L + a.T - 1) / a.T;
  const unsigned chunks = static_cast<unsigned>(a.B * a.H * nc);
  const int64_t s1 = 5 * a.T * static_cast<int64_t>(sizeof(float));
  const int64_t s3 = backward_smem(a.T, a.R, a.P, a.N);
  // Passes 1 and 3 on the tensor cores when the context rounds its products
  // and their tiles fit; else the kernels here (sums in double where they
  // matter). The exact path keeps these: F32 accumulators lost too much of
  // the decay's gradient in the SSD case (docs/CUDA.md).
  const bool tiles = !a.split && a.T * a.R == kChunkRows && mamba3_backward_tiles_fit(a.R, a.P, a.N);
  if (tiles) {
    launch_mamba3_chunk_sums_tiles(a, s);
  } else {
    chunk_sums_kernel<<<chunks, kThreads, static_cast<size_t>(s1), s>>>(a);
  }
  const int64_t entries = a.B * a.H * a.P * a.N;
  if ((a.P * a.N) % 4 == 0 && reinterpret_cast<uintptr_t>(a.scratch) % 16 == 0)
    chunk_pass_kernel<4><<<blocks(entries / 4, kThreads), kThreads, 0, s>>>(a);
  else
    chunk_pass_kernel<1><<<blocks(entries, kThreads), kThreads, 0, s>>>(a);
  if (tiles) {
    launch_mamba3_chunk_backward_tiles(a, s);
  } else {
    cudaFuncSetAttribute(chunk_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(s3));
    chunk_backward_kernel<<<chunks, kThreads, static_cast<size_t>(s3), s>>>(a);
  }
  step_grads_kernel<<<static_cast<unsigned>(a.B * a.H), kThreads, 0, s>>>(a);
  if (a.dD) {
    double* parts = reinterpret_cast<double*>(a.scratch + skip_parts_offset(a.B, a.H, a.L, a.P, a.N, a.T));
    skip_grad_parts_kernel<<<dim3(static_cast<unsigned>(a.H), kSkipParts), kThreads, 0, s>>>(a, parts);
    skip_grad_kernel<<<blocks(a.H, 64), 64, 0, s>>>(a, parts);
  }
}

}  // namespace ssm::cuda

// mamba3_prepare on the GPU, in three kernels on the op's stream:
//   rows   a warp per (row, normed block): RMSNorm of every (rank, group)
//          block of B and C, and the angle rates pi tanh(ang) (shared by
//          the heads);
//   phase  a block per (b, h, group of 8 angles): the phase walk through
//          time, a prefix sum over runs of steps (a thread per (run, angle));
//   heads  a block per (b, t) and run of heads: dt, A, lam, and q, k
//          (normed, biased, rotated by the step's phase) and v = x mimo_x.
// The same float arithmetic as the cpu backend (src/ops/cpu/mamba3_prepare.cpp),
// except the phase's sums over more than 16 steps (added in runs).
#include <algorithm>
#include <cstdint>

#include "ops/cuda/float_runs.h"
#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/mamba3_scalars.h"
#include "ops/cuda/overlap_launch.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float step_dt(const Mamba3PrepareLaunch& a, int64_t row, int64_t h) {
  return mamba3_softplus(a.ddt.p[row * a.ddt.stride + h] + a.dt_bias[h]);
}

__global__ void rows_kernel(Mamba3PrepareLaunch a) {
  let_next_kernel_start();
  wait_for_previous_kernel();  // first: each of these reads what the one before wrote
  const int64_t RG = a.R * a.G, per_row = 2 * RG;
  const int64_t warp = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= a.B * a.L * per_row) return;  // the whole warp: the shuffles below see all lanes
  const int64_t row = warp / per_row, i = warp % per_row;
  const bool is_C = i >= RG;
  const int64_t block = is_C ? i - RG : i;
  const ConstRows& src = is_C ? a.C : a.Bm;
  const float* in = src.p + row * src.stride + block * a.N;
  const float* w = is_C ? a.C_norm : a.B_norm;
  float* dst = (is_C ? a.C_normed : a.B_normed) + (row * RG + block) * a.N;
  double ss = 0;  // in double, like ops::rms_norm and the cpu kernel
  for (int64_t n = lane; n < a.N; n += 32) ss += static_cast<double>(in[n]) * in[n];
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float s = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(a.N) + a.norm_eps));
  for (int64_t n = lane; n < a.N; n += 32) dst[n] = in[n] * s * w[n];
  if (i == 0)
    for (int64_t j = lane; j < a.S; j += 32)
      a.ang_rate[row * a.S + j] = kMamba3Pi * tanhf(a.ang.p[row * a.ang.stride + j]);
}

// use(t, advance(t)) for the steps [t0, t1) in order, kAhead steps' loads
// issued before the first of them is used.
template <class Advance, class Use>
__device__ void walk_ahead(int64_t t0, int64_t t1, const Advance& advance, const Use& use) {
  constexpr int kAhead = 4;
  for (int64_t t = t0; t < t1; t += kAhead) {
    float adv[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) adv[u] = t + u < t1 ? advance(t + u) : 0.f;
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      if (t + u < t1) use(t + u, adv[u]);
  }
}

// Block per (b, h, group of up to kPhaseAngles angles), a prefix sum over
// time in two passes: thread (g, jj) takes angle j = j0 + jj over run g < K
// of the steps (K = blockDim.x / the group's width, runs of ceil(L / K)
// steps). Each run first sums its advances; the run sums are scanned (a
// fixed tree in shared memory); then each run walks its steps again from
// the phase before it (the entering phase plus the earlier runs' sums),
// writing every step's phase. One run (a decode step) is the plain
// sequential walk. A block per (b, h) over all S angles was 24 blocks at
// 1 x 2048 (S 32: 32 runs of 64 steps, about 48 us a launch on an H100,
// each step a memory latency); groups of 8 angles give 4 times the blocks
// and runs of 16 steps, and each thread issues kAhead steps' loads before
// using them (walk_ahead: a load after a store cannot be moved above it).
constexpr int kPhaseAngles = 8;
__global__ void __launch_bounds__(1024) phase_kernel(Mamba3PrepareLaunch a) {
  let_next_kernel_start();
  wait_for_previous_kernel();  // first: each of these reads what the one before wrote
  extern __shared__ float run_sums[];  // 2 x K x width: the scan's two buffers
  const int64_t S = a.S, L = a.L, width = min(S, int64_t{kPhaseAngles});
  const int64_t groups = (S + width - 1) / width, bh = blockIdx.x / groups;
  const int64_t b = bh / a.H, h = bh % a.H;
  const int K = static_cast<int>(blockDim.x / width);
  const int g = static_cast<int>(threadIdx.x / width), jj = static_cast<int>(threadIdx.x % width);
  const int64_t j = (blockIdx.x % groups) * width + jj;
  const bool live = j < S;  // the last group may be narrower; all threads meet the barriers
  const int64_t per = (L + K - 1) / K, t0 = g * per, t1 = live ? min(L, t0 + per) : t0;
  const int64_t row0 = b * L;
  const float entering = live ? a.phase[bh * S + j] : 0.f;  // read by all before the barrier
  // The advance rounded before it is added (__fmul_rn: never fused into an
  // FMA), so that mamba3_step.cu's phase step is this one to the bit
  // whatever the compiler fuses in either kernel.
  auto advance = [&](int64_t t) {
    return __fmul_rn(a.ang_rate[(row0 + t) * S + j], step_dt(a, row0 + t, h));
  };
  float sum = 0.f;
  walk_ahead(t0, t1, advance, [&](int64_t, float adv) { sum += adv; });
  // Inclusive scan of the run sums over g (Hillis-Steele, ping-pong buffers).
  const int cells = K * static_cast<int>(width), me = g * static_cast<int>(width) + jj;
  int cur = 0;
  run_sums[me] = sum;
  __syncthreads();
  for (int off = 1; off < K; off *= 2) {
    const float* in = run_sums + cur * cells;
    const float v = g >= off ? in[me] + in[me - off * static_cast<int>(width)] : in[me];
    cur ^= 1;
    run_sums[cur * cells + me] = v;
    __syncthreads();
  }
  float phase = g > 0 ? entering + run_sums[cur * cells + me - static_cast<int>(width)] : entering;
  walk_ahead(t0, t1, advance, [&](int64_t t, float adv) {
    phase += adv;
    a.phases[(bh * L + t) * S + j] = phase;
  });
  // The last run ends at L - 1 (or holds no steps and starts there).
  if (live && g == K - 1) a.phase[bh * S + j] = phase;
}

// Block per (b, t) and run of heads (heads_per_block below): dt, A, lam of
// each head, then a thread per item: 4 consecutive entries of q and k (a
// head, rank r, entries n0..n0+3) or of v. Each item issues all its loads
// (16-byte ones when `vec_qk` or `vec_v`) before its stores, and reduces
// each angle once (sincosf; adjacent pairs share theirs): 71 registers,
// three 256-thread blocks a multiprocessor, where a sine and a cosine per
// entry took 84 and two. That kernel was latency-bound on its loads and
// the angles' reductions, 17% of the H100's DRAM rate at 8 x 2048 (1.16 ms
// a launch, ncu, 2026-12-07); a register bound of 64 spilled.
__global__ void heads_kernel(Mamba3PrepareLaunch a, bool vec_qk, bool vec_v) {
  let_next_kernel_start();
  wait_for_previous_kernel();  // first: each of these reads what the one before wrote
  const int64_t L = a.L, H = a.H, S = a.S;
  const int64_t runs = gridDim.x / (a.B * L), run = blockIdx.x % runs, row = blockIdx.x / runs;
  const int64_t b = row / L, t = row % L;
  const int64_t per_run = (H + runs - 1) / runs, h0 = run * per_run, h1 = min(H, h0 + per_run);
  const int heads = static_cast<int>(h1 - h0);
  if (heads <= 0) return;
  for (int i = threadIdx.x; i < heads; i += blockDim.x) {
    const int64_t h = h0 + i, step = (b * H + h) * L + t;
    a.dt[step] = step_dt(a, row, h);
    a.A[step] = fminf(-mamba3_heavy_tail(a.ddA.p[row * a.ddA.stride + h]), -a.A_floor);
    a.lam[step] = mamba3_sigmoid(a.trap.p[row * a.trap.stride + h]);
  }
  // 32-bit indices inside the row: no 64-bit divisions per item.
  const int N = static_cast<int>(a.N), P = static_cast<int>(a.P), R = static_cast<int>(a.R);
  const int Si = static_cast<int>(S), half = N / 2, G = static_cast<int>(a.G);
  const int hpg = static_cast<int>(H / a.G), Q = (N + 3) / 4, V = (P + 3) / 4;
  const int qk_items = heads * R * Q;
  for (int i = threadIdx.x; i < heads * R * (Q + V); i += blockDim.x) {
    if (i < qk_items) {
      const int hh = i / (R * Q), rest = i - hh * R * Q, r = rest / Q, n0 = 4 * (rest - r * Q);
      const int h = static_cast<int>(h0) + hh, g = h / hpg, count = min(4, N - n0);
      const int64_t step = (b * H + h) * L + t;
      const int64_t src = ((row * R + r) * G + g) * N, bias = (int64_t{h} * R + r) * N;
      // Entry n0 + e: rotated with angle j[e], as the pair's first (role 0)
      // or second entry, its partner at m[e]. Adjacent pairs rotate
      // [0, 2S) (a quad holds whole pairs); halves rotate [0, S) and
      // [N/2, N/2 + S) (a quad inside one half when vec_qk).
      int j[4], m[4];
      bool rot[4], second[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = n0 + e;
        if (!a.halves) {
          rot[e] = n < 2 * Si, j[e] = n / 2, second[e] = n % 2 == 1, m[e] = n ^ 1;
        } else {
          second[e] = n >= half, j[e] = second[e] ? n - half : n;
          rot[e] = j[e] < Si, m[e] = second[e] ? n - half : n + half;
        }
        rot[e] = rot[e] && e < count;
      }
      const float *cn = a.C_normed + src, *bn = a.B_normed + src, *cb = a.C_bias + bias, *bb = a.B_bias + bias;
      float cnv[4], cbv[4], bnv[4], bbv[4], ph[4], cnp[4] = {}, cbp[4] = {}, bnp[4] = {}, bbp[4] = {};
      load_quad(cnv, cn + n0, count, vec_qk);
      load_quad(cbv, cb + n0, count, vec_qk);
      load_quad(bnv, bn + n0, count, vec_qk);
      load_quad(bbv, bb + n0, count, vec_qk);
      const bool any_rot = rot[0] || rot[1] || rot[2] || rot[3];
      if (a.halves && any_rot) {
        // Partners: the other half's quad (vec_qk: a quad lies inside one half).
        if (vec_qk) {
          load_quad(cnp, cn + m[0], 4, true);
          load_quad(cbp, cb + m[0], 4, true);
          load_quad(bnp, bn + m[0], 4, true);
          load_quad(bbp, bb + m[0], 4, true);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (rot[e]) cnp[e] = cn[m[e]], cbp[e] = cb[m[e]], bnp[e] = bn[m[e]], bbp[e] = bb[m[e]];
        }
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) ph[e] = rot[e] ? a.phases[step * S + j[e]] : 0.f;
      // One sine and cosine an angle: adjacent pairs' entries 2i and 2i + 1
      // share theirs (n0 is a multiple of 4), so half the reductions.
      float cosv[4], sinv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (!a.halves && e % 2 == 1) {
          cosv[e] = cosv[e - 1], sinv[e] = sinv[e - 1];
        } else if (rot[e]) {
          sincosf(ph[e], &sinv[e], &cosv[e]);
        } else {
          cosv[e] = 1.f, sinv[e] = 0.f;
        }
      }
      float qo[4], ko[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float q_own = cnv[e] + cbv[e], k_own = bnv[e] + bbv[e];
        if (!rot[e]) {
          qo[e] = q_own, ko[e] = k_own;
          continue;
        }
        // Adjacent pairs' partner is inside the quad (n0 a multiple of 4).
        const float q_par = a.halves ? cnp[e] + cbp[e] : cnv[e ^ 1] + cbv[e ^ 1];
        const float k_par = a.halves ? bnp[e] + bbp[e] : bnv[e ^ 1] + bbv[e ^ 1];
        const float c = cosv[e], sn = sinv[e];  // (a, b) -> (a c - b s, a s + b c)
        // Products rounded (__fmul_rn: never fused into an FMA), so that
        // mamba3_step.cu's rotation is this one to the bit whatever the
        // compiler would fuse in either kernel.
        if (!second[e]) {
          qo[e] = __fmul_rn(q_own, c) - __fmul_rn(q_par, sn);
          ko[e] = __fmul_rn(k_own, c) - __fmul_rn(k_par, sn);
        } else {
          qo[e] = __fmul_rn(q_par, sn) + __fmul_rn(q_own, c);
          ko[e] = __fmul_rn(k_par, sn) + __fmul_rn(k_own, c);
        }
      }
      store_quad(a.q + (step * R + r) * N + n0, qo, count, vec_qk);
      store_quad(a.k + (step * R + r) * N + n0, ko, count, vec_qk);
    } else {
      const int iv = i - qk_items, hh = iv / (R * V), rest = iv - hh * R * V, r = rest / V,
                p0 = 4 * (rest - r * V);
      const int h = static_cast<int>(h0) + hh, count = min(4, P - p0);
      const int64_t step = (b * H + h) * L + t;
      float xv[4], mv[4], out[4];
      load_quad(xv, a.x.p + row * a.x.stride + int64_t{h} * P + p0, count, vec_v);
      if (a.mimo_x) {
        load_quad(mv, a.mimo_x + (int64_t{h} * R + r) * P + p0, count, vec_v);
#pragma unroll
        for (int e = 0; e < 4; ++e) out[e] = xv[e] * mv[e];
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) out[e] = xv[e];
      }
      store_quad(a.v + (step * R + r) * P + p0, out, count, vec_v);
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void launch_mamba3_prepare(const Mamba3PrepareLaunch& a, cudaStream_t s) {
  if (a.B * a.L == 0) return;
  const int64_t warps = a.B * a.L * 2 * a.R * a.G;
  launch_overlapped(a.overlap, rows_kernel, dim3(static_cast<unsigned>((warps * 32 + kThreads - 1) / kThreads)),
                    dim3(kThreads), 0, s, a);
  if (a.S > 0) {
    // Groups of up to kPhaseAngles angles; runs of at least 16 steps, at
    // most 1024 threads.
    const int64_t width = std::min<int64_t>(a.S, kPhaseAngles), groups = (a.S + width - 1) / width;
    const int64_t runs = std::max<int64_t>(1, std::min<int64_t>(1024 / width, (a.L + 15) / 16));
    const size_t smem = static_cast<size_t>(2 * runs * width) * sizeof(float);
    launch_overlapped(a.overlap, phase_kernel, dim3(static_cast<unsigned>(a.B * a.H * groups)),
                      dim3(static_cast<unsigned>(runs * width)), smem, s, a);
  }
  // About 256 items (quads of q and k, or of v) a block: runs of
  // heads_per_block heads, a thread an item.
  const int64_t per_head = a.R * ((a.N + 3) / 4 + (a.P + 3) / 4);
  const int64_t heads_per_block = std::clamp<int64_t>(256 / per_head, 1, a.H);
  const int64_t runs = (a.H + heads_per_block - 1) / heads_per_block;
  const int64_t threads = std::min<int64_t>(1024, (heads_per_block * per_head + 31) / 32 * 32);
  // 16-byte accesses: every quad's rows start 16-byte aligned, and
  // halves' quads lie inside one half.
  const bool vec_qk = a.N % 4 == 0 && (!a.halves || a.N % 8 == 0) && aligned16(a.B_normed) &&
                      aligned16(a.C_normed) && aligned16(a.B_bias) && aligned16(a.C_bias) && aligned16(a.q) &&
                      aligned16(a.k);
  const bool vec_v = a.P % 4 == 0 && a.x.stride % 4 == 0 && aligned16(a.x.p) && aligned16(a.v) &&
                     (a.mimo_x == nullptr || aligned16(a.mimo_x));
  launch_overlapped(a.overlap, heads_kernel, dim3(static_cast<unsigned>(a.B * a.L * runs)),
                    dim3(static_cast<unsigned>(threads)), 0, s, a, vec_qk, vec_v);
}

}  // namespace ssm::cuda

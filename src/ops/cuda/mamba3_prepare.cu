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

#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/overlap_launch.h"

namespace ssm::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kPi = 3.14159265358979323846f;

__device__ float softplus_f(float x) { return x > 20.f ? x : (x < -20.f ? expf(x) : log1pf(expf(x))); }
__device__ float sigmoid_f(float x) {
  return x >= 0.f ? 1.f / (1.f + expf(-x)) : expf(x) / (1.f + expf(x));
}
__device__ float heavy_tail_f(float v) { return v >= 0.f ? 1.f + v : 1.f / (1.f - v); }

__device__ float step_dt(const Mamba3PrepareLaunch& a, int64_t row, int64_t h) {
  return softplus_f(a.ddt.p[row * a.ddt.stride + h] + a.dt_bias[h]);
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
    for (int64_t j = lane; j < a.S; j += 32) a.ang_rate[row * a.S + j] = kPi * tanhf(a.ang.p[row * a.ang.stride + j]);
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
// using them (a load after a store cannot be moved above it).
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
  auto advance = [&](int64_t t) {
    return a.ang_rate[(row0 + t) * S + j] * step_dt(a, row0 + t, h);
  };
  constexpr int kAhead = 4;
  float sum = 0.f;
  for (int64_t t = t0; t < t1; t += kAhead) {
    float adv[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) adv[u] = t + u < t1 ? advance(t + u) : 0.f;
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      if (t + u < t1) sum += adv[u];
  }
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
  for (int64_t t = t0; t < t1; t += kAhead) {
    float adv[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) adv[u] = t + u < t1 ? advance(t + u) : 0.f;
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      if (t + u < t1) {
        phase += adv[u];
        a.phases[(bh * L + t + u) * S + j] = phase;
      }
  }
  // The last run ends at L - 1 (or holds no steps and starts there).
  if (live && g == K - 1) a.phase[bh * S + j] = phase;
}

// Block per (b, t) and run of heads (heads_per_block below): thread per
// entry of q and k (head, rank r, entry n), each reading the pair its entry
// belongs to; then v. A block per (b, h, t) of 128 threads was bound by the
// blocks' start-up and one round of loads each (393,216 blocks at 8 x 2048).
__global__ void heads_kernel(Mamba3PrepareLaunch a) {
  let_next_kernel_start();
  wait_for_previous_kernel();  // first: each of these reads what the one before wrote
  const int64_t L = a.L, H = a.H, R = a.R, P = a.P, S = a.S;
  const int N = static_cast<int>(a.N), RN = static_cast<int>(R) * N, RP = static_cast<int>(R * P);
  const int64_t runs = gridDim.x / (a.B * L), run = blockIdx.x % runs, row = blockIdx.x / runs;
  const int64_t b = row / L, t = row % L;
  const int64_t per_run = (H + runs - 1) / runs, h0 = run * per_run, h1 = min(H, h0 + per_run);
  const int heads = static_cast<int>(h1 - h0);
  if (heads <= 0) return;
  const int64_t heads_per_group = H / a.G;
  for (int i = threadIdx.x; i < heads; i += blockDim.x) {
    const int64_t h = h0 + i, step = (b * H + h) * L + t;
    a.dt[step] = step_dt(a, row, h);
    a.A[step] = fminf(-heavy_tail_f(a.ddA.p[row * a.ddA.stride + h]), -a.A_floor);
    a.lam[step] = sigmoid_f(a.trap.p[row * a.trap.stride + h]);
  }
  // q and k: first the rotated pairs, a thread a pair (its angle's cos and
  // sin once for the pair's two entries of q and of k), then the entries
  // past the rotated ones, copied. 32-bit indices inside the row: no 64-bit
  // divisions per entry.
  const int Si = static_cast<int>(S), half = N / 2, G = static_cast<int>(a.G);
  const int hpg = static_cast<int>(heads_per_group), Ri = static_cast<int>(R);
  const int64_t row_base = row * R * G;  // (row, r, g) blocks of B_normed / C_normed
  const int rotated = Ri * Si, unrotated = Ri * (N - 2 * Si);
  for (int i = threadIdx.x; i < heads * rotated; i += blockDim.x) {
    const int hh = i / rotated, rest = i - hh * rotated, r = rest / Si, j = rest - r * Si;
    const int h = static_cast<int>(h0) + hh, g = h / hpg;
    const int64_t step = (b * H + h) * L + t;
    const int64_t src = (row_base + r * G + g) * N, bias = (int64_t{h} * R + r) * N;
    const int i0 = a.halves ? j : 2 * j, i1 = a.halves ? j + half : 2 * j + 1;
    const float* cn = a.C_normed + src;
    const float* bn = a.B_normed + src;
    const float* cb = a.C_bias + bias;
    const float* bb = a.B_bias + bias;
    const float phase = a.phases[step * S + j];
    const float c = cosf(phase), sn = sinf(phase);  // (a, b) -> (a c - b s, a s + b c)
    const float qa = cn[i0] + cb[i0], qb = cn[i1] + cb[i1];
    const float ka = bn[i0] + bb[i0], kb = bn[i1] + bb[i1];
    float* q = a.q + step * RN + r * N;
    float* k = a.k + step * RN + r * N;
    q[i0] = qa * c - qb * sn;
    q[i1] = qa * sn + qb * c;
    k[i0] = ka * c - kb * sn;
    k[i1] = ka * sn + kb * c;
  }
  for (int i = threadIdx.x; i < heads * unrotated; i += blockDim.x) {
    const int per = N - 2 * Si, hh = i / (Ri * per), rest = i - hh * Ri * per, r = rest / per,
              u = rest - r * per;
    // Adjacent pairs rotate [0, 2S); halves rotate [0, S) and [N/2, N/2 + S).
    const int n = !a.halves ? 2 * Si + u : (u < half - Si ? Si + u : half + Si + (u - (half - Si)));
    const int h = static_cast<int>(h0) + hh, g = h / hpg;
    const int64_t step = (b * H + h) * L + t;
    const int64_t src = (row_base + r * G + g) * N, bias = (int64_t{h} * R + r) * N;
    a.q[step * RN + r * N + n] = a.C_normed[src + n] + a.C_bias[bias + n];
    a.k[step * RN + r * N + n] = a.B_normed[src + n] + a.B_bias[bias + n];
  }
  for (int i = threadIdx.x; i < heads * RP; i += blockDim.x) {
    const int64_t h = h0 + i / RP, step = (b * H + h) * L + t;
    const int e = i % RP, r = e / static_cast<int>(P), p = e % static_cast<int>(P);
    const float* xh = a.x.p + row * a.x.stride + h * P;
    a.v[step * RP + e] = a.mimo_x ? xh[p] * a.mimo_x[(h * R + r) * P + p] : xh[p];
  }
}

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
  // About 1024 entries of q and k a block: runs of heads_per_block heads.
  const int64_t heads_per_block = std::clamp<int64_t>(1024 / std::max<int64_t>(1, a.R * a.N), 1, a.H);
  const int64_t runs = (a.H + heads_per_block - 1) / heads_per_block;
  launch_overlapped(a.overlap, heads_kernel, dim3(static_cast<unsigned>(a.B * a.L * runs)), dim3(kThreads), 0, s,
                    a);
}

}  // namespace ssm::cuda

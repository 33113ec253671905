// mamba3_scan and mamba3_output on the GPU.
//
// The scan is the sequential trapezoidal recurrence in F32, written with
// U_t = sum_r v_t,r k_t,r^T:  S_t = alpha_t S_{t-1} + beta_t U_{t-1} + gamma_t U_t,
// o_t,r = S_t q_t,r + D v_t,r. Like ssd_scan (conv_ssd.cu): a block per
// (b, h, 16 state rows p; 64 in a decode step of many sequences); thread (p, j) keeps the PER
// adjacent state entries n = j PER + e of row p and the same entries of U_{t-1} in registers
// (W slices, a power of two <= 32 lanes of one warp, which sum o_t,r[p]
// with shuffles: state_step_math.h's order and arithmetic, those of the
// many-sequence decode step, mamba3_scan_step.cu); k_t, q_t, v_t and the step scalars of `stage` steps at a
// time are staged in shared memory. After the scan a second kernel stores
// k and v of the last step as the state's k_prev, v_prev (the scan's blocks
// read the old ones, so they are replaced only once all have run).
//
// The output: a warp per (row, head), lanes over the head's channels.
#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>

#include "ops/cuda/launch_mamba3.h"
#include "ops/cuda/overlap_launch.h"
#include "ops/cuda/state_memory.h"
#include "ops/cuda/state_step_math.h"

namespace ssm::cuda {
namespace {

constexpr int kRowsPerBlock = 16;
constexpr int kThreads = 256;

__device__ float silu_f(float z) { return z / (1.f + expf(-z)); }

// ROWS = 4 (launch_mamba3_scan: a decode step of many sequences): thread
// (p, j) keeps rows p, p + kRowsPerBlock, ... of a block of 64, each summed
// as one row of ROWS = 1 (the same bits): at batch 64 the step streams
// 50 MB of state a layer (the 130m models), and a block of 16 rows spent
// its time staging k, q and the step's scalars, as every block does, around
// 8 KB of it; 64 rows carry 32 KB of state loads in flight and stage a
// quarter as often. The state is streamed there (state_memory.h). T: the
// state's element type (float, or __nv_bfloat16 widened and rounded by
// state_memory.h).
template <int PER, int ROWS, class T>
__global__ void scan_kernel(Mamba3ScanLaunch a, int W, int stage) {
  let_next_kernel_start();
  extern __shared__ float smem[];
  constexpr int kRows = ROWS * kRowsPerBlock;
  constexpr bool kStream = ROWS > 1;
  const int N = static_cast<int>(a.N), R = static_cast<int>(a.R);
  const int64_t L = a.L, P = a.P;
  const int64_t row_blocks = (P + kRows - 1) / kRows;
  const int64_t bh = blockIdx.x / row_blocks, p0 = (blockIdx.x % row_blocks) * kRows;
  const int rows_here = static_cast<int>(min(int64_t{kRows}, P - p0));
  float* sk = smem;                     // stage x R x N
  float* sq = sk + stage * R * N;       // stage x R x N
  float* sv = sq + stage * R * N;       // stage x R x kRows
  float* sco = sv + stage * R * kRows;  // stage x 3: alpha, beta, gamma
  const int pl = static_cast<int>(threadIdx.x) / W, j = static_cast<int>(threadIdx.x) % W;
  // Row r of the thread in the block: pl + r kRowsPerBlock, or row 0 past
  // the block's rows (read, summed and not written).
  const auto row = [&](int r) { return pl + r * kRowsPerBlock < rows_here ? pl + r * kRowsPerBlock : 0; };
  const int warp_base = (static_cast<int>(threadIdx.x) / 32) * 32;
  const int in_warp = min(32, static_cast<int>(blockDim.x) - warp_base);
  const unsigned mask = in_warp == 32 ? 0xffffffffu : ((1u << in_warp) - 1u);

  T* const ssm = static_cast<T*>(a.ssm.p);
  float st[ROWS][PER], up[ROWS][PER];
#pragma unroll
  for (int rw = 0; rw < ROWS; ++rw) {
    const int64_t p = p0 + row(rw);
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      const int n = j * PER + e;
      st[rw][e] = 0.f;
      up[rw][e] = 0.f;
      if (n < N && ssm) {
        st[rw][e] = load_state<kStream>(ssm + (bh * P + p) * N + n);
        for (int r = 0; r < R; ++r)
          up[rw][e] = rank_term(up[rw][e], a.v_prev[(bh * R + r) * P + p], a.k_prev[(bh * R + r) * N + n]);
      }
    }
  }
  const float Dh = a.D ? a.D[bh % a.H] : 0.f;
  // Only now what the kernels before wrote (k, q, v, the step's scalars).
  // The state and k_prev, v_prev above were written by this layer's scan
  // and last-step kernels in an earlier step, which have finished (a step's
  // kernels start after the previous step's: the ids' copy or the graph's
  // replay orders them), so their loads overlap the previous kernel's tail.
  wait_for_previous_kernel();
  const int64_t RN = int64_t{R} * N;
  const float* kb = a.k + bh * L * RN;
  const float* qb = a.q + bh * L * RN;
  const float* vb = a.v + bh * L * R * P;
  float* ob = a.o + bh * L * R * P;
  for (int64_t t0 = 0; t0 < L; t0 += stage) {
    const int steps = static_cast<int>(min(int64_t{stage}, L - t0));
    for (int64_t i = threadIdx.x; i < steps * RN; i += blockDim.x) {
      sk[i] = kb[t0 * RN + i];
      sq[i] = qb[t0 * RN + i];
    }
    for (int i = threadIdx.x; i < steps * R * rows_here; i += blockDim.x) {
      const int tt = i / (R * rows_here), rem = i % (R * rows_here), r = rem / rows_here, c = rem % rows_here;
      sv[(tt * R + r) * kRows + c] = vb[((t0 + tt) * R + r) * P + p0 + c];
    }
    for (int tt = threadIdx.x; tt < steps; tt += blockDim.x) {
      const int64_t s = bh * L + t0 + tt;
      const Mamba3Coefs c = mamba3_coefs(a.dt[s], a.lam[s], a.A[s]);
      sco[3 * tt] = c.alpha;
      sco[3 * tt + 1] = c.beta;
      sco[3 * tt + 2] = c.gamma;
    }
    __syncthreads();
    for (int tt = 0; tt < steps; ++tt) {
      const Mamba3Coefs c = {sco[3 * tt], sco[3 * tt + 1], sco[3 * tt + 2]};
      const float* kt = sk + tt * RN;
      const float* qt = sq + tt * RN;
      const float* vt = sv + tt * R * kRows;
#pragma unroll
      for (int rw = 0; rw < ROWS; ++rw) {
        const int pr = row(rw);
#pragma unroll
        for (int e = 0; e < PER; ++e) {
          const int n = j * PER + e;
          if (n < N) {
            float u = 0.f;
            for (int r = 0; r < R; ++r) u = rank_term(u, vt[r * kRows + pr], kt[r * N + n]);
            st[rw][e] = mamba3_entry(st[rw][e], c, up[rw][e], u);
            up[rw][e] = u;
          }
        }
        for (int r = 0; r < R; ++r) {
          const float acc = row_y<PER>(st[rw], qt + r * N, j, N, mask, W);
          if (pl + rw * kRowsPerBlock < rows_here && j == 0)
            ob[((t0 + tt) * R + r) * P + p0 + pr] = y_out(acc, Dh, vt[r * kRows + pr]);
        }
      }
    }
    __syncthreads();
  }
  if (ssm) {
#pragma unroll
    for (int rw = 0; rw < ROWS; ++rw) {
      if (pl + rw * kRowsPerBlock >= rows_here) continue;
      const int64_t p = p0 + row(rw);
#pragma unroll
      for (int e = 0; e < PER; ++e) {
        const int n = j * PER + e;
        if (n < N) store_state<kStream>(ssm + (bh * P + p) * N + n, st[rw][e]);
      }
    }
  }
}

// k_prev, v_prev <- k, v of step L-1, for every (b, h).
__global__ void last_step_kernel(Mamba3ScanLaunch a) {
  let_next_kernel_start();
  wait_for_previous_kernel();  // first: each of these reads what the one before wrote
  const int64_t RN = a.R * a.N, RP = a.R * a.P, per = RN + RP;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < a.B * a.H * per;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t bh = i / per, e = i % per, last = bh * a.L + a.L - 1;
    if (e < RN) a.k_prev[bh * RN + e] = a.k[last * RN + e];
    else a.v_prev[bh * RP + e - RN] = a.v[last * RP + e - RN];
  }
}

__global__ void output_kernel(Mamba3OutputLaunch a) {
  let_next_kernel_start();
  wait_for_previous_kernel();  // first: each of these reads what the one before wrote
  __shared__ float inv_rms[kThreads / 32][kMamba3MaxRank];
  const int64_t warp = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32), wl = static_cast<int>(threadIdx.x / 32);
  if (warp >= a.B * a.L * a.H) return;  // the whole warp
  const int64_t row = warp / a.H, h = warp % a.H, b = row / a.L, t = row % a.L;
  const int64_t R = a.R, P = a.P;
  const float* o = a.o + ((b * a.H + h) * a.L + t) * R * P;  // o_r = o + r P
  // z of the lane's first kKept channels loaded before the norm's pass, so
  // that its loads overlap o's instead of following them.
  const float* zrow = a.z.p + row * a.z.stride + h * P;
  constexpr int kKept = 2;  // P 64 at 130m
  float zk[kKept];
#pragma unroll
  for (int i = 0; i < kKept; ++i) zk[i] = lane + 32 * i < P ? zrow[lane + 32 * i] : 0.f;
  if (a.norm) {
    for (int64_t r = 0; r < R; ++r) {
      double ss = 0;  // in double, like the cpu kernel
      for (int64_t p = lane; p < P; p += 32) ss += static_cast<double>(o[r * P + p]) * o[r * P + p];
      for (int m = 16; m > 0; m /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, m);
      if (lane == 0) inv_rms[wl][r] = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(P) + a.norm_eps));
    }
    __syncwarp();
  }
  auto write = [&](int64_t p, float z) {
    float acc = 0.f;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t m = (h * R + r) * P + p;
      const float zr = a.mimo_z ? z * a.mimo_z[m] : z;
      const float on = a.norm ? o[r * P + p] * inv_rms[wl][r] * a.norm[h * P + p] : o[r * P + p];
      const float gated = on * silu_f(zr);
      acc += a.mimo_o ? gated * a.mimo_o[m] : gated;
    }
    a.y.p[row * a.y.stride + h * P + p] = acc;
  };
#pragma unroll
  for (int i = 0; i < kKept; ++i)
    if (lane + 32 * i < P) write(lane + 32 * i, zk[i]);
  for (int64_t p = lane + 32 * kKept; p < P; p += 32) write(p, zrow[p]);
}

// The slices per state row, as ssd_scan takes them: the fewest (a power of
// two, at most 32) that keep each thread's share within 8 entries.
int scan_slices(int64_t N) {
  int W = 1;
  while (W < 32 && (N + W - 1) / W > 8) W *= 2;
  return W;
}

}  // namespace

// The shared memory of one time step of scan_kernel for blocks of `rows`
// state rows.
static int64_t step_bytes(int64_t R, int64_t N, int64_t rows) {
  return (2 * R * N + R * rows + 3) * static_cast<int64_t>(sizeof(float));
}

int64_t mamba3_scan_step_bytes(int64_t R, int64_t N) { return step_bytes(R, N, kRowsPerBlock); }

// The state rows a block of scan_kernel takes in a decode step (L = 1):
// kRowsPerBlock while a launch of those has fewer than kWideFrom blocks (at
// batch 1 the 130m models' 96 blocks of one sequence, which a wider block
// would leave to 24 multiprocessors), else kWideRows times as many. 512
// (the 130m models from batch 6, about four blocks a multiprocessor of an
// H100) is an estimate, not a measurement.
constexpr int kWideRows = 4;
constexpr int64_t kWideFrom = 512;

template <class T>
static auto scan_kernel_for(bool wide, int64_t need) -> void (*)(Mamba3ScanLaunch, int, int) {
  return wide         ? scan_kernel<8, kWideRows, T>
         : need <= 1  ? scan_kernel<1, 1, T>
         : need <= 2  ? scan_kernel<2, 1, T>
         : need <= 4  ? scan_kernel<4, 1, T>
         : need <= 8  ? scan_kernel<8, 1, T>
         : need <= 16 ? scan_kernel<16, 1, T>
                      : scan_kernel<32, 1, T>;
}

// Wide blocks for a SISO decode step whose thread keeps 8 entries a row
// (one instantiation; N from 17 to 256), when its one step fits 48 KiB.
// Not MIMO: on an H100 the 130m MIMO R = 4 model decoded at batch 64 at
// 7,572 tokens/s with them against 8,315 without (SISO 13,344 against
// 12,051): R products a row and step make the wide blocks' threads too
// long for their few blocks. Where its 16-byte pieces fit, the streamed
// step of mamba3_scan_step.cu instead.
static bool scan_wide(const Mamba3ScanLaunch& a) {
  const int W = scan_slices(a.N);
  const int64_t need = (a.N + W - 1) / W;
  const int64_t narrow_blocks = a.B * a.H * ((a.P + kRowsPerBlock - 1) / kRowsPerBlock);
  return a.L == 1 && a.R == 1 && narrow_blocks >= kWideFrom && a.P > kRowsPerBlock && need > 4 && need <= 8 &&
         step_bytes(a.R, a.N, kWideRows * kRowsPerBlock) <= 48 * 1024;
}

bool mamba3_scan_streams_wide(const Mamba3ScanLaunch& a) { return scan_wide(a) && mamba3_scan_streams(a); }

void launch_mamba3_scan(const Mamba3ScanLaunch& a, cudaStream_t s) {
  if (a.B * a.H * a.L == 0) return;
  const int W = scan_slices(a.N);
  const int64_t need = (a.N + W - 1) / W;
  const bool wide = scan_wide(a);
  if (wide && mamba3_scan_streams(a)) {
    launch_mamba3_scan_step(a, W, s);
    launch_mamba3_last_step(a, s);
    return;
  }
  const int64_t rows = wide ? kWideRows * kRowsPerBlock : kRowsPerBlock;
  // As many steps per stage as fit in 40 KiB of shared memory (at most 64),
  // and at least one (the host wrapper takes steps of at most 48 KiB).
  const int64_t per_step = step_bytes(a.R, a.N, rows);
  // No more than the sequence has: a decode step's block then asks for
  // 1 KB, not 40, and more of them fit a multiprocessor.
  const int stage = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>({64, 40960 / per_step, a.L})));
  const size_t smem = static_cast<size_t>(stage * per_step);
  const dim3 grid(static_cast<unsigned>(a.B * a.H * ((a.P + rows - 1) / rows)));
  const dim3 block(static_cast<unsigned>(std::min<int64_t>(a.P, kRowsPerBlock) * W));
  const auto kernel = a.ssm.bf16 ? scan_kernel_for<__nv_bfloat16>(wide, need) : scan_kernel_for<float>(wide, need);
  launch_overlapped(a.overlap, kernel, grid, block, smem, s, a, W, stage);
  launch_mamba3_last_step(a, s);
}

void launch_mamba3_last_step(const Mamba3ScanLaunch& a, cudaStream_t s) {
  if (!a.ssm) return;
  const int64_t n = a.B * a.H * a.R * (a.N + a.P);
  const int64_t blocks = std::min<int64_t>(4096, (n + kThreads - 1) / kThreads);
  launch_overlapped(a.overlap, last_step_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, s, a);
}

void launch_mamba3_output(const Mamba3OutputLaunch& a, cudaStream_t s) {
  const int64_t warps = a.B * a.L * a.H;
  if (warps == 0) return;
  launch_overlapped(a.overlap, output_kernel, dim3(static_cast<unsigned>((warps * 32 + kThreads - 1) / kThreads)),
                    dim3(kThreads), 0, s, a);
}

}  // namespace ssm::cuda
